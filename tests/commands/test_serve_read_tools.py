"""The read-only workspace tools under a real `serve --workspace`: what they open cannot hang
the turn, what they read stays small, and a runaway regex cannot keep the run busy — with
ripgrep on PATH and without it (the RE2 fallback)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from steerable_bridge.adapters.tools.workspace import READ_MAX_CHARS

from .serve_child import clean_env, frames, started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CALLS = [
    {"id": "fifo-read", "name": "read_file", "arguments": {"path": "pipe"}},
    {"id": "fifo-grep", "name": "grep", "arguments": {"pattern": "x", "path": "pipe"}},
    {"id": "window", "name": "read_file", "arguments": {"path": "one.txt", "line": 1, "limit": 3}},
    {"id": "runaway", "name": "grep", "arguments": {"pattern": "(a+)+$", "path": "evil.txt"}},
    {"id": "lookahead", "name": "grep", "arguments": {"pattern": "a(?=b)", "path": "evil.txt"}},
]


@contextmanager
def serving(tmp_path: Path, *, ripgrep: bool) -> Iterator[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe")  # nobody ever opens its other end
    with (workspace / "one.txt").open("w") as handle:  # 50 MB on one line
        handle.write("x" * (50 * 1024 * 1024) + "\nsecond\n")
    (workspace / "evil.txt").write_text("a" * 100_000 + "b\n")
    script = tmp_path / "script.json"
    rounds = [{"tool_calls": CALLS}, {"text": "done"}]
    script.write_text(json.dumps({"rounds": rounds, "loop": True}))
    env = clean_env(XDG_STATE_HOME=str(tmp_path / "state"))  # spill files stay in tmp_path
    if not ripgrep:
        empty = tmp_path / "bin"
        empty.mkdir()
        env["PATH"] = str(empty)  # the server runs by absolute path; rg is not found
    args = ["--model", f"scripted:{script}", "--workspace", str(workspace), "--sandbox", "off"]
    with started(args, env) as (base, _):
        yield base


@pytest.mark.parametrize("ripgrep", [True, False], ids=["ripgrep", "re2-fallback"])
def test_fifos_huge_lines_and_runaway_patterns_end_promptly(tmp_path: Path, ripgrep: bool) -> None:
    with serving(tmp_path, ripgrep=ripgrep) as base:
        body = {
            "threadId": "t1",
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "look around"}],
        }
        # A safety bound only: each tool's own timeout is 30-60 s, and a FIFO that blocked
        # would end as tool_timeout, failing the code check below.
        reply = httpx.post(f"{base}/agent", json=body, timeout=100)
    events = frames(reply.text)
    assert events[-1]["type"] == "RUN_FINISHED"
    results = {f["toolCallId"]: f for f in events if f["type"] == "TOOL_CALL_RESULT"}
    assert set(results) == {call["id"] for call in CALLS}

    def error_of(call_id: str) -> object:
        finished = results[call_id]["metadata"]["steerable"]  # type: ignore[index]
        return (finished.get("error") or {}).get("code")  # type: ignore[union-attr]

    assert error_of("fifo-read") == "not_a_regular_file"
    assert error_of("fifo-grep") == "not_a_regular_file"
    assert "FIFO" in str(results["fifo-read"]["content"])
    window = str(results["window"]["content"])
    assert error_of("window") is None
    assert len(window.encode()) < 2 * READ_MAX_CHARS  # 50 MB asked for, a bounded part shown
    assert "only the first" in window and "line=2" in window  # the line was cut, not read whole
    assert error_of("runaway") is None and results["runaway"]["content"] == "(no matches)"
    assert error_of("lookahead") == "unsupported_pattern"  # refused, never shown as matches
