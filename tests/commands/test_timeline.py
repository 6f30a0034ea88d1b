"""`sessions show ID --timeline`: each run as a waterfall of what the loop bracketed, with
durations taken from the events' timestamps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from steerable_bridge.commands.timeline import draw, timelines
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.values import ToolError, Usage


def _events() -> list[ev.LoopEvent]:
    seq = iter(range(100))

    def e(cls: type[Any], ts: int, **fields: Any) -> Any:
        return cls(session_id="s", run_id="run_1", seq=next(seq), ts=ts, **fields)

    request = ModelRequest(model="demo:default", system="", messages=())
    return [
        e(ev.RunStarted, 1000, model="demo:default", trace_id="ab" * 16),
        e(ev.StepStarted, 1000, step=1),
        e(ev.ModelRequestEvent, 1000, step=1, request=request),
        e(ev.ModelResponseEvent, 1400, step=1, finish_reason="tool_calls",
          usage=Usage(prompt_tokens=30, completion_tokens=5)),
        e(ev.ToolCallEnd, 1400, call_id="c1", name="write", arguments_json="{}"),
        e(ev.ToolCallEnd, 1400, call_id="c2", name="nope", arguments_json="{}"),
        e(ev.PermissionRequested, 1400, call_id="c1", tool_name="write", options=()),
        e(ev.PermissionResolved, 1600, call_id="c1", tool_name="write", outcome="allow_once"),
        e(ev.ToolStarted, 1600, call_id="c1"),
        e(ev.ToolFinished, 1800, call_id="c1", status="completed"),
        e(ev.ToolFinished, 1800, call_id="c2", status="failed",
          error=ToolError(code="unknown_tool", message="no such tool")),
        e(ev.StepFinished, 1800, step=1, finish_reason="tool_calls"),
        e(ev.StepStarted, 1800, step=2),
        e(ev.ModelRequestEvent, 1800, step=2, request=request),
        e(ev.RunFailed, 2000, code="model_timeout", message="slow"),
    ]  # fmt: skip


def test_a_run_becomes_rows_with_durations_and_notes() -> None:
    (run,) = timelines(_events())
    assert run.trace_id == "ab" * 16
    rows = [(r.depth, r.label, r.end - r.start if r.end else None, r.note) for r in run.rows]
    assert rows == [
        (0, "run run_1", 1000, "failed: model_timeout"),
        (1, "step 1", 800, "tool_calls"),
        (2, "model demo:default", 400, "tool_calls, 30 in / 5 out"),
        (2, "permission write", 200, "allow_once"),
        (2, "tool write", 200, "completed"),
        (2, "tool nope", 0, "failed (unknown_tool)"),
        (1, "step 2", 200, "did not finish"),
        (2, "model demo:default", 200, "did not finish"),
    ]


def test_a_notice_is_a_row_of_its_own_that_does_not_wait() -> None:
    events = _events()
    notice = ev.Notice(
        session_id="s", run_id="run_1", seq=99, ts=1000, severity="warning", title="No sandbox"
    )
    (run,) = timelines([events[0], notice, *events[1:]])
    row = run.rows[1]
    assert (row.depth, row.label, row.end, row.note) == (  # outside a step: under the run
        1,
        "notice (warning): No sandbox",
        1000,
        "",
    )


def test_the_waterfall_places_each_bar_on_the_runs_axis() -> None:
    (run,) = timelines(_events())
    lines = draw(run, width=10)
    assert lines[0] == f"trace {'ab' * 16}"
    bars = {" ".join(line.split("|")[0].split()): line.split("|")[1] for line in lines[1:]}
    assert bars["run run_1 1.00 s"] == "█" * 10
    assert bars["model demo:default 400 ms"] == "████      "
    assert bars["permission write 200 ms"] == "    ██    "
    assert bars["tool write 200 ms"] == "      ██  "
    assert bars["step 2 200 ms"] == "        ██"


def test_sessions_show_timeline_draws_a_stored_session(tmp_path: Path) -> None:
    store = tmp_path / "sessions.db"
    env = {"STEERABLE_DEMO_PACE_MS": "0", "PATH": "/usr/bin:/bin"}
    cli = [sys.executable, "-m", "steerable_bridge.cli"]
    subprocess.run(
        [*cli, "run", "--storage", str(store), "--approve", "all", "use a tool"],
        check=True, capture_output=True, env=env, timeout=60,
    )  # fmt: skip
    listing = subprocess.run(
        [*cli, "sessions", "list", "--storage", str(store), "--json"],
        check=True, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    sid = json.loads(listing.stdout)["sessions"][0]["session_id"]
    shown = subprocess.run(
        [*cli, "sessions", "show", sid, "--storage", str(store), "--timeline"],
        check=True, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    labels = [line.strip().split("  ")[0] for line in shown.stdout.splitlines()]
    assert labels[0].startswith("run run_")
    assert labels[1:] == [
        "step 1", "model demo:default", "tool calculate", "step 2", "model demo:default"
    ]  # fmt: skip
    assert "end_turn" in shown.stdout.splitlines()[0]
