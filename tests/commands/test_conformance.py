"""`steerable-bridge conformance`: the table, --json, --markdown and the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_bridge.runtime.events import KINDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mapping.md"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEERABLE_DEMO_PACE_MS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_markdown_prints_the_committed_mapping() -> None:
    done = cli("--markdown", timeout=30)
    assert done.returncode == 0
    assert done.stdout == DOCS.read_text(encoding="utf-8")


@pytest.mark.timeout(90)
def test_json_reports_every_kind_on_every_transport() -> None:
    done = cli("--scenario", "one_tool", "--examples", "40", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert set(report["kinds"]) == set(KINDS)
    assert report["kinds"]["tool_call_end"] == {"acp": "pass", "acp-editor": "pass", "agui": "pass"}
    assert report["kinds"]["step_started"]["acp-editor"] == "n/a (channel)"
    # a streamed compaction's pieces reach only an editor that advertised session.compaction:
    # graded on generated sessions rendered for one, when the examples drew any
    assert report["kinds"]["compaction_summary_delta"]["acp-editor"] in (
        "pass",
        "n/a (session.compaction)",
    )
    assert report["scenarios"] == [
        {"name": "one_tool", "results": {"runtime": "pass", "acp": "pass", "acp-editor": "pass",
                                         "agui": "pass"}}
    ]  # fmt: skip
    assert "one_tool: acp done" in done.stderr  # progress while it ran


@pytest.mark.timeout(60)
def test_the_table_and_a_failing_exit_status() -> None:
    done = cli("--scenario", "no_such_scenario", "--examples", "5")
    assert done.returncode == 1
    assert "problem: unknown scenario among no_such_scenario" in done.stdout
    assert done.stdout.splitlines()[0].split() == ["kind", "acp", "acp-editor", "agui"]
    assert done.stdout.rstrip().endswith("conformance: FAIL")
