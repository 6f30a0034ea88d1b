"""The small edges a new user meets first, each driven through the real command.

A bare `steerable-bridge`, `--version`, the start-up line of `serve` / `acp`, the demo
model without file tools, `check agui` pointed at the chat page, `completion bash|zsh`, a
tool card's title, the chat page's timeline summary, and the LICENSE the metadata names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from steerable_bridge.adapters.tools.builtin import UPDATE_STATE
from steerable_bridge.commands.startup import startup_line

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "steerable_bridge.cli"]
PAGE = ROOT / "steerable_bridge" / "transports" / "agui" / "static" / "index.html"

pytestmark = pytest.mark.timeout(60)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(tmp / "state")}


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=_env(tmp), timeout=30,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.slow
def test_a_bare_command_prints_the_help_and_exits_0(tmp_path: Path) -> None:
    done = _cli(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: steerable-bridge")
    assert "serve" in done.stdout and "completion" in done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    done = _cli(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout == f"steerable-bridge {version('steerable-bridge')}\n"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`serve` on port 0 with no --workspace; yields its base URL and the process."""
    process = subprocess.Popen(
        [*COMMAND, "serve", "--port", "0", "--storage", "memory"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=_env(tmp_path), text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        base = process.stdout.readline().split()[-1].removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=10) as client:
            for _ in range(200):  # bound before the line is printed, listening a moment later
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
        yield base, process
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_serve_names_what_it_uses_and_the_demo_says_how_to_get_file_tools(
    served: tuple[str, subprocess.Popen[str]],
) -> None:
    base, process = served
    assert process.stderr is not None
    # serve's log lines (its connection limits, say) may come first; the start-up line is
    # among the first few
    wanted = "steerable-bridge: model demo:default, storage memory, workspace none (no file tools)"
    first: list[str] = []
    while wanted not in first and len(first) < 5:
        first.append(process.stderr.readline().rstrip("\n"))
    assert wanted in first, first
    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "write a file"}],
    }
    reply = httpx.post(f"{base}/agent", json=body, timeout=10)
    blocks = [b.split("\n", 1)[-1] if b.startswith("id: ") else b for b in reply.text.split("\n\n")]
    frames = [json.loads(b[6:]) for b in blocks if b.startswith("data: ")]
    text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert "--workspace DIR" in text
    assert not any(f["type"] == "TOOL_CALL_START" for f in frames)


@pytest.mark.slow
def test_check_agui_at_the_chat_page_suggests_the_endpoint(
    served: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    base, _ = served
    done = _cli(tmp_path, "check", "agui", f"{base}/")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("steerable-bridge check agui: could not run:")
    assert "HTTP 405" in lines[0] and f"e.g. {base}/agent" in lines[0]


@pytest.mark.slow
def test_acp_names_what_it_uses_on_stderr_and_keeps_stdout_for_the_protocol(
    tmp_path: Path,
) -> None:
    done = _cli(tmp_path, "acp", "--storage", "memory")
    assert done.stdout == ""  # stdin closed at once: no frame was asked for, none was sent
    assert (
        "steerable-bridge: model demo:default, storage memory,"
        " workspace each session's folder, as the editor opens it"
    ) in done.stderr.splitlines()


@pytest.mark.slow
def test_with_json_logs_the_start_up_line_is_a_json_log_object(tmp_path: Path) -> None:
    done = _cli(tmp_path, "acp", "--storage", "memory", "--log-format", "json")
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert [r["message"] for r in records if r["message"].startswith("steerable-bridge: model")]


def test_the_start_up_line_never_shows_a_storage_password() -> None:
    line = startup_line("demo:default", "postgresql://me:secret@db.example:5432/x", None)
    assert "secret" not in line
    assert "storage postgresql://me:***@db.example:5432/x," in line


def _bash_complete(script: str, line: str) -> list[str]:
    words = line.split(" ")
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; _steerable_bridge; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_options_and_choices(tmp_path: Path) -> None:
    done = _cli(tmp_path, "completion", "bash")
    assert done.returncode == 0, done.stderr
    script = done.stdout
    assert _bash_complete(script, "steerable-bridge se") == ["serve", "sessions"]
    assert _bash_complete(script, "steerable-bridge run --appr") == ["--approve"]
    assert _bash_complete(script, "steerable-bridge run --approve ") == ["ask", "all", "none"]
    assert _bash_complete(script, "steerable-bridge check a") == ["agui", "acp"]
    assert "--session" in _bash_complete(script, "steerable-bridge run --model demo:default --")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_the_zsh_script_parses(tmp_path: Path) -> None:
    done = _cli(tmp_path, "completion", "zsh")
    assert done.returncode == 0 and done.stdout.startswith("#compdef steerable-bridge")
    parsed = subprocess.run(
        ["zsh", "-n"], input=done.stdout, capture_output=True, text=True, timeout=30, check=False
    )
    assert parsed.returncode == 0, parsed.stderr


def test_a_tool_card_counts_its_operations_in_proper_english() -> None:
    one = {"patch": [{"op": "add", "path": "/a", "value": 1}]}
    assert UPDATE_STATE.describe(one)[0] == "Update shared state (1 operation)"
    two = {"patch": one["patch"] * 2}
    assert UPDATE_STATE.describe(two)[0] == "Update shared state (2 operations)"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_the_chat_page_timeline_counts_every_row_it_draws() -> None:
    page = PAGE.read_text(encoding="utf-8")
    functions = [
        re.search(rf"^function {name}\(.*?^}}$|^function {name}\(.*?}}$", page, re.M | re.S)
        for name in ("duration", "timelineSummary")
    ]
    assert all(functions), "the page's duration / timelineSummary functions moved"
    rows = [{"start": 0, "end": 30}, {"start": 1, "end": 20}, {"start": 2, "end": 10}]
    program = "\n".join(f.group(0) for f in functions if f) + (
        f"\nconsole.log(timelineSummary({{rows: {json.dumps(rows)}}}, 30));"
        f"\nconsole.log(timelineSummary({{rows: [{{start: 0, end: 5}}]}}, 5));"
    )
    done = subprocess.run(
        ["node", "-e", program], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Timeline · 30 ms · 3 spans", "Timeline · 5 ms · 1 span"]


def test_the_licence_the_metadata_names_is_there() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = { text = "Apache-2.0" }' in (ROOT / "pyproject.toml").read_text()
