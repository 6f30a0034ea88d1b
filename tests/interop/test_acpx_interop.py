"""Interop: acpx 0.19.1, the headless ACP command-line client, drives `steerable-bridge acp`.

Each test runs the real `acpx` (pinned in package-lock.json) against this project's ACP
agent on the demo model, with HOME and the session store in a temporary folder: one-shot
text; permissions approved and denied, with the client's fs (acpx writes the file) and
without it (`--no-fs --no-terminal`: the agent writes to disk); named sessions that acpx
resumes across processes, lists and closes; `acpx cancel` stopping a streaming turn; and
`acp --validate-client` grading acpx with no failure. acpx keeps a queue-owner process
per session: the tests close their sessions, which ends it, and `--ttl` bounds it anyway.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
CLI = HERE / "node_modules" / "acpx" / "dist" / "cli.js"
AGENT = f"{sys.executable} -m steerable_bridge.cli acp"
TTL = "10"
"""Seconds a session's queue-owner process outlives its last turn (closing the session
ends it sooner). Shorter ones race: acpx may hand a turn to an owner that is leaving."""


def _env(tmp: Path, pace_ms: int = 0) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp / "state"),
        "STEERABLE_DEMO_PACE_MS": str(pace_ms),
        "STEERABLE_STORAGE": str(tmp / "sessions.db"),
        "PYTHONPATH": str(HERE.parent.parent),
    }


def _acpx(node: str, tmp: Path, cwd: Path, *args: str, agent: str = AGENT, status: int = 0) -> str:
    cwd.mkdir(exist_ok=True)
    done = subprocess.run(
        [node, str(CLI), "--agent", agent, "--cwd", str(cwd), "--ttl", TTL, *args],
        cwd=cwd,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == status, f"acpx {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _frames(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _stop_reason(frames: list[dict[str, Any]]) -> str:
    (stop,) = [f["result"]["stopReason"] for f in frames if "stopReason" in f.get("result", {})]
    return str(stop)


def _updates(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind
    ]


def _text(frames: list[dict[str, Any]]) -> str:
    return "".join(u["content"].get("text", "") for u in _updates(frames, "agent_message_chunk"))


@pytest.mark.timeout(150)
def test_acpx_text_and_permissions(node: str, tmp_path: Path) -> None:
    said = _frames(_acpx(node, tmp_path, tmp_path / "a", "--format", "json", "exec", "hello"))
    assert _stop_reason(said) == "end_turn" and "demo model" in _text(said)

    # Approved, with the client's fs: the agent asks acpx to write the file.
    ws = tmp_path / "approve"
    approved = _frames(
        _acpx(node, tmp_path, ws, "--approve-all", "--format", "json", "exec", "write a note")
    )
    assert _stop_reason(approved) == "end_turn"
    assert any(f.get("method") == "fs/write_text_file" for f in approved)
    assert (ws / "demo-note.txt").is_file()

    # Denied: nothing written, the tool call fails, the turn still ends normally (acpx
    # exits 5, its PERMISSION_DENIED, when it refused something).
    ws = tmp_path / "deny"
    denied = _frames(
        _acpx(
            node, tmp_path, ws, "--deny-all", "--format", "json", "exec", "write a note", status=5
        )
    )
    assert _stop_reason(denied) == "end_turn"
    assert any(f.get("method") == "session/request_permission" for f in denied)
    assert [u["status"] for u in _updates(denied, "tool_call_update") if "status" in u][
        -1
    ] == "failed"
    assert not (ws / "demo-note.txt").exists()

    # Without client fs and terminal: the agent writes to the local disk itself.
    ws = tmp_path / "local"
    local = _frames(
        _acpx(
            node,
            tmp_path,
            ws,
            "--no-fs",
            "--no-terminal",
            "--approve-all",
            "--format",
            "json",
            "exec",
            "write a note",
        )
    )
    assert _stop_reason(local) == "end_turn"
    assert not any(f.get("method") == "fs/write_text_file" for f in local)
    assert (ws / "demo-note.txt").is_file()


@pytest.mark.timeout(150)
def test_acpx_sessions_resume_list_and_close(node: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    created = _acpx(node, tmp_path, ws, "sessions", "new", "--name", "work").strip()
    session_id = created.splitlines()[-1].strip()
    assert session_id.startswith("sess_")
    first = _frames(_acpx(node, tmp_path, ws, "--format", "json", "prompt", "-s", "work", "hello"))
    second = _frames(
        _acpx(node, tmp_path, ws, "--format", "json", "prompt", "-s", "work", "and again")
    )
    # The first prompt starts the session's agent process, which resumes the session acpx
    # created in another process (acpx never uses session/load); the second reuses it.
    assert "session/resume" in {f.get("method") for f in first}
    for frames in (first, second):
        assert _stop_reason(frames) == "end_turn"
        assert "session/load" not in {f.get("method") for f in frames}
    assert "and again" in _text(second)
    listed = _acpx(node, tmp_path, ws, "sessions")
    assert session_id in listed
    _acpx(node, tmp_path, ws, "sessions", "close", "work")
    assert "closed" in _acpx(node, tmp_path, ws, "sessions", "show", "work").lower()


@pytest.mark.timeout(150)
def test_acpx_cancel_stops_a_streaming_turn(node: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _acpx(node, tmp_path, ws, "sessions", "new", "--name", "slow")
    out = tmp_path / "prompt.out"
    with out.open("w") as sink:
        prompt = subprocess.Popen(
            [node, str(CLI), "--agent", AGENT, "--cwd", str(ws), "--ttl", TTL,
             "--format", "json", "prompt", "-s", "slow", "hello"],
            cwd=ws, env=_env(tmp_path, pace_ms=150), stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while "agent_message_chunk" not in out.read_text():
                assert prompt.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)  # polling a file another process writes; bounded above
            _acpx(node, tmp_path, ws, "cancel", "-s", "slow")
            assert prompt.wait(timeout=30) == 0
            _acpx(node, tmp_path, ws, "sessions", "close", "slow")
        finally:
            if prompt.poll() is None:
                prompt.kill()
                prompt.wait(timeout=5)
    frames = _frames(out.read_text())
    assert any(f.get("method") == "session/cancel" for f in frames)
    assert _stop_reason(frames) == "cancelled"


@pytest.mark.timeout(150)
def test_the_client_validator_finds_no_fault_in_acpx(node: str, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    validator = f"{AGENT} --validate-client --cancel-timeout 2 --report {report_path}"
    _acpx(node, tmp_path, tmp_path / "ws", "--approve-all", "exec", "hello", agent=validator)
    report = json.loads(report_path.read_text())
    assert report["summary"]["fail"] == 0, report
    passed = {c["id"] for c in report["checks"] if c["status"] == "pass"}
    assert {"client.initialize", "fs.write_text_file", "terminal.create"} <= passed
