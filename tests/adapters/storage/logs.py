"""A session log with a compaction, shared by the store tests."""

from __future__ import annotations

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import TextPart


def long_session(sid: str) -> list[ev.LoopEvent]:
    """Two runs; the second compacts. Facts (title, mode, state, always) predate it."""
    e: list[ev.LoopEvent] = []

    def add(cls: type[ev.EventBase], run_id: str, **fields: object) -> None:
        e.append(cls(session_id=sid, run_id=run_id, seq=len(e), ts=1000 + len(e), **fields))  # type: ignore[arg-type]

    add(ev.ModeChanged, "", mode_id="read-only")
    add(ev.RunStarted, "r1", model="m")
    add(ev.UserMessage, "r1", message_id="u1", content=(TextPart(text="hello"),))
    add(ev.SessionInfo, "r1", title="Hello")
    add(ev.StateSnapshot, "r1", state_json='{"n":1}')
    add(ev.TextStart, "r1", message_id="m1")
    for _ in range(50):
        add(ev.TextDelta, "r1", message_id="m1", delta="old ")
    add(ev.TextEnd, "r1", message_id="m1")
    add(
        ev.PermissionResolved,
        "r1",
        call_id="c0",
        tool_name="write",
        outcome="allow_always",
        option_id="allow_always",
    )
    add(ev.StateDelta, "r1", patch_json='[{"op":"replace","path":"/n","value":2}]')
    add(ev.RunFinished, "r1", stop_reason="end_turn")
    add(ev.RunStarted, "r2", model="m")
    add(ev.UserMessage, "r2", message_id="u2", content=(TextPart(text="more"),))
    add(ev.Compaction, "r2", summary="they said hello", through_seq=len(e) - 1)
    add(ev.TextStart, "r2", message_id="m2")
    add(ev.TextDelta, "r2", message_id="m2", delta="new")
    add(ev.TextEnd, "r2", message_id="m2")
    add(ev.RunFinished, "r2", stop_reason="end_turn")
    return e
