"""Coalescing a replay: each message's consecutive deltas become one event, nothing else
changes, and the text a client assembles is the same."""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.session_log.replay import coalesce_deltas


def _log(*specs: tuple[type[Any], dict[str, Any]]) -> list[ev.LoopEvent]:
    return [
        cls(session_id="s", run_id=fields.pop("run", "r1"), seq=seq, ts=1000 + seq, **fields)
        for seq, (cls, fields) in enumerate(specs)
    ]


def test_consecutive_deltas_of_one_message_become_one_with_the_first_seq_and_ts() -> None:
    log = _log(
        (ev.TextStart, {"message_id": "m1"}),
        (ev.TextDelta, {"message_id": "m1", "delta": "Hel"}),
        (ev.TextDelta, {"message_id": "m1", "delta": "lo"}),
        (ev.TextDelta, {"message_id": "m1", "delta": "!"}),
        (ev.TextEnd, {"message_id": "m1"}),
    )
    out = list(coalesce_deltas(log))
    assert [c.event.kind for c in out] == ["text_start", "text_delta", "text_end"]
    folded = out[1]
    assert isinstance(folded.event, ev.TextDelta)
    assert (folded.event.delta, folded.event.seq, folded.event.ts) == ("Hello!", 1, 1001)
    assert (folded.folded, folded.last_seq) == (3, 3)
    assert [(c.folded, c.last_seq) for c in (out[0], out[2])] == [(1, 0), (1, 4)]


def test_another_message_kind_call_run_or_event_in_between_starts_a_new_chunk() -> None:
    log = _log(
        (ev.ReasoningDelta, {"message_id": "m1", "delta": "think "}),
        (ev.ReasoningDelta, {"message_id": "m1", "delta": "more"}),
        (ev.TextDelta, {"message_id": "m1", "delta": "a"}),
        (ev.TextDelta, {"message_id": "m2", "delta": "b"}),
        (ev.TextDelta, {"message_id": "m2", "delta": "c", "run": "r2"}),
        (ev.ToolCallDelta, {"call_id": "c1", "delta": '{"a"'}),
        (ev.ToolCallDelta, {"call_id": "c1", "delta": ": 1}"}),
        (ev.ToolCallDelta, {"call_id": "c2", "delta": "{}"}),
        (ev.TextDelta, {"message_id": "m2", "delta": "d", "run": "r2"}),
        (ev.UsageUpdated, {"used": 5}),
        (ev.TextDelta, {"message_id": "m2", "delta": "e", "run": "r2"}),
    )
    out = [c.event for c in coalesce_deltas(log)]
    assert [(e.kind, getattr(e, "delta", None), e.seq) for e in out] == [
        ("reasoning_delta", "think more", 0),
        ("text_delta", "a", 2),
        ("text_delta", "b", 3),
        ("text_delta", "c", 4),
        ("tool_call_delta", '{"a": 1}', 5),
        ("tool_call_delta", "{}", 7),
        ("text_delta", "d", 8),
        ("usage_updated", None, 9),
        ("text_delta", "e", 10),
    ]


def test_a_log_without_deltas_is_replayed_unchanged() -> None:
    log = _log(
        (ev.UserMessage, {"message_id": "u1", "content": ()}), (ev.UsageUpdated, {"used": 1})
    )
    assert [c.event for c in coalesce_deltas(log)] == log
