"""The `steerable-bridge` command: run (text and --jsonl), schema, configuration errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_bridge import cli
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def instant_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    for name in ("STEERABLE_MODEL", "STEERABLE_STORAGE", "STEERABLE_APPROVE"):
        monkeypatch.delenv(name, raising=False)


def test_run_streams_the_answer_and_shows_tools_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["run", "use", "a", "tool"]) == 0
    out, err = capsys.readouterr()
    assert "6 * 7 = 42" in out
    assert "[tool] Calculate 6 * 7" in err and "[tool] completed" in err


def test_run_jsonl_prints_one_loop_event_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--jsonl", "think", "then", "use", "a", "tool"]) == 0
    lines = capsys.readouterr().out.splitlines()
    events = [codec.event_from_json(line) for line in lines]
    assert isinstance(events[0], ev.RunStarted) and events[0].model == "demo:default"
    assert isinstance(events[-1], ev.RunFinished) and events[-1].stop_reason == "end_turn"
    assert [e.seq for e in events] == list(range(len(events)))
    found = {e.kind for e in events}
    assert {"reasoning_delta", "text_delta", "tool_call_end", "tool_finished"} <= found


def test_a_failed_turn_exits_1_with_the_code_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "show", "an", "error"]) == 1
    assert "error [demo_error]:" in capsys.readouterr().err


def test_run_with_a_scripted_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rounds": [{"text": "scripted hello"}]}))
    assert cli.main(["run", "--model", f"scripted:{script}", "hi"]) == 0
    assert capsys.readouterr().out.strip() == "scripted hello"


def test_schema_prints_the_taxonomy(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert sorted(schema["discriminator"]["mapping"]) == sorted(ev.KINDS)
    assert cli.main(["schema", "--kinds"]) == 0
    assert capsys.readouterr().out.split() == list(ev.KINDS)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--model", "nope:x", "hi"], "no model provider named 'nope'"),
        (["run", "--model", ":x", "hi"], "must look like provider:model"),
        (["run", "--model", "openai", "hi"], "--model openai:NAME"),
        (["run", "--max-steps", "0", "hi"], "--max-steps must be at least 1"),
    ],
)
def test_configuration_errors_print_one_line_and_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("steerable-bridge: ")
    assert needle in lines[0]
    assert captured.out == ""


def test_a_bad_environment_value_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "fast")
    assert cli.main(["run", "hi"]) == 2
    assert "STEERABLE_DEMO_PACE_MS='fast' is not a number" in capsys.readouterr().err


def test_the_installed_command_runs_in_a_fresh_process() -> None:
    env = {**os.environ, "STEERABLE_DEMO_PACE_MS": "0"}
    env.pop("STEERABLE_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "run", "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "demo model" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "run", "--model", "nope:x", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("steerable-bridge: ")
