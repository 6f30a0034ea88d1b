"""The AG-UI renderer: every LoopEvent kind renders to valid AG-UI events that decode back to
exactly the same LoopEvent, the run opens and closes natively, and nothing is `null`."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ag_ui.core import EventType
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import Interrupt, Usage
from steerable_bridge.transports.agui.renderer import AguiRenderer
from tests.lanes import examples
from tests.runtime.strategies import for_dataclass
from tests.transports.agui.decoding import decode, frames

THREAD = "thread-1"
RUN_KINDS = (ev.RunStarted, ev.RunFinished, ev.RunFailed)
BODY_TYPES = [cls for cls in ev.EVENT_TYPES if cls not in RUN_KINDS]


def _fix(events: list[Any]) -> list[ev.LoopEvent]:
    """Give drawn events one session, increasing seqs and timestamps AG-UI accepts."""
    return [
        dataclasses.replace(event, session_id=THREAD, seq=i, ts=abs(event.ts) % 2**50)
        for i, event in enumerate(events)
    ]


def _render(events: list[ev.LoopEvent], *, legacy: bool = False) -> list[dict[str, Any]]:
    renderer = AguiRenderer(
        thread_id=THREAD, run_id="agui-run", messages=lambda: [], legacy_outcomes=legacy
    )
    encoder = EventEncoder()
    body = "".join(encoder.encode(m) for e in events for m in renderer.render(e))
    return frames(body.encode())


def _nulls(value: Any, path: str = "") -> list[str]:
    """Paths of nulls outside the free-form payloads (CUSTOM value, metadata, state)."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        free = {"value", "metadata", "snapshot", "delta", "content", "rawEvent"}
        return [p for k, v in value.items() if k not in free for p in _nulls(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}/{i}")]
    return []


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_every_kind_decodes_back_to_the_same_event(data: st.DataObject) -> None:
    body = [data.draw(for_dataclass(cls)) for cls in BODY_TYPES]
    start = data.draw(for_dataclass(ev.RunStarted))
    end = data.draw(st.one_of(for_dataclass(ev.RunFinished), for_dataclass(ev.RunFailed)))
    events = _fix([start, *body, end])
    wire = _render(events)
    assert decode(wire) == events
    assert wire[0]["type"] == "RUN_STARTED"
    assert wire[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    assert "MESSAGES_SNAPSHOT" in [f["type"] for f in wire[-3:-1]]
    for frame in wire:
        assert _nulls(frame) == [], frame
        assert "timestamp" not in frame or isinstance(frame["timestamp"], int)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of([for_dataclass(cls) for cls in BODY_TYPES]), max_size=8))
def test_any_sequence_round_trips(body: list[ev.LoopEvent]) -> None:
    events = _fix([ev.RunStarted(session_id="", run_id="r", seq=0, ts=1, model="m"), *body])
    assert decode(_render(events)) == events


def _run(*body: ev.LoopEvent, end: ev.LoopEvent) -> list[dict[str, Any]]:
    start = ev.RunStarted(session_id=THREAD, run_id="r1", seq=0, ts=5, model="demo")
    return _render(_fix([start, *body, end]))


def _finished(**fields: Any) -> ev.RunFinished:
    return ev.RunFinished(session_id=THREAD, run_id="r1", seq=0, ts=9, **fields)


def test_the_native_kinds_are_the_ones_with_handlers() -> None:
    renderer = AguiRenderer(thread_id=THREAD, run_id="x")
    assert set(renderer._handlers) == AguiRenderer.NATIVE


def test_run_started_carries_the_agui_ids_and_protocol_version() -> None:
    wire = _run(end=_finished(stop_reason="end_turn"))
    assert wire[0]["threadId"] == THREAD and wire[0]["runId"] == "agui-run"
    assert wire[0]["protocolVersion"] == "1.0"
    assert wire[0]["timestamp"] == 5


def test_outcomes() -> None:
    assert _run(end=_finished(stop_reason="end_turn"))[-1]["outcome"] == {"type": "success"}
    assert _run(end=_finished(stop_reason="cancelled"))[-1]["outcome"] == {"type": "cancelled"}
    pending = _run(end=_finished(stop_reason="interrupted", pending_tool_call_ids=("c1",)))
    assert pending[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c1"]}
    interrupt = Interrupt(
        id="approval-c2",
        reason="Approve it?",
        tool_call_id="c2",
        response_schema_json='{"type":"object"}',
    )
    wire = _run(end=_finished(stop_reason="interrupted", interrupts=(interrupt,)))
    assert wire[-1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {
                "id": "approval-c2",
                "reason": "Approve it?",
                "toolCallId": "c2",
                "responseSchema": {"type": "object"},
            }
        ],
    }
    usage = _run(end=_finished(stop_reason="end_turn", usage=Usage(prompt_tokens=3)))
    assert usage[-1]["usage"][0]["inputTokens"] == 3


def test_a_0_0_x_client_gets_only_the_outcomes_its_strict_schema_accepts() -> None:
    def legacy(end: ev.RunFinished) -> list[dict[str, Any]]:
        start = ev.RunStarted(session_id=THREAD, run_id="r1", seq=0, ts=5, model="demo")
        return _render(_fix([start, end]), legacy=True)

    pending = legacy(_finished(stop_reason="interrupted", pending_tool_call_ids=("c1",)))
    assert pending[-1]["outcome"] == {"type": "success"}
    cancelled = legacy(_finished(stop_reason="cancelled"))
    assert "outcome" not in cancelled[-1]
    interrupt = Interrupt(id="approval-c2", reason="Approve it?", tool_call_id="c2")
    asked = legacy(_finished(stop_reason="interrupted", interrupts=(interrupt,)))
    assert asked[-1]["outcome"]["type"] == "interrupt"
    for wire in (pending, cancelled):  # the facts still decode, from metadata
        (finished,) = [e for e in decode(wire) if isinstance(e, ev.RunFinished)]
        assert finished.stop_reason == wire[-1]["metadata"]["steerable"]["stop_reason"]
    (finished,) = [e for e in decode(pending) if isinstance(e, ev.RunFinished)]
    assert finished.pending_tool_call_ids == ("c1",)


def test_run_error_is_last_and_nothing_follows_the_end() -> None:
    renderer = AguiRenderer(thread_id=THREAD, run_id="x")
    assert renderer.render(ev.RunStarted(session_id=THREAD, run_id="r", seq=0, ts=1, model="m"))
    failed = renderer.render(
        ev.RunFailed(session_id=THREAD, run_id="r", seq=1, ts=2, code="boom", message="it broke")
    )
    assert [e.type for e in failed] == [EventType.RUN_ERROR]
    late = ev.TextStart(session_id=THREAD, run_id="r", seq=2, ts=3, message_id="m")
    assert renderer.render(late) == [] and renderer.dropped == 1
    assert renderer.render(_finished(stop_reason="end_turn")) == []
    assert renderer.derived_error("x", "y") == []


def test_events_before_run_started_are_held_until_it_comes() -> None:
    renderer = AguiRenderer(thread_id=THREAD, run_id="x")
    info = ev.SessionInfo(session_id=THREAD, run_id="", seq=0, ts=1, title="t")
    assert renderer.render(info) == []
    out = renderer.render(ev.RunStarted(session_id=THREAD, run_id="r", seq=1, ts=2, model="m"))
    assert [e.type for e in out] == [EventType.RUN_STARTED, EventType.CUSTOM]


def test_reasoning_renders_as_span_and_message() -> None:
    start = ev.ReasoningStart(session_id=THREAD, run_id="r1", seq=0, ts=1, message_id="t1")
    delta = ev.ReasoningDelta(
        session_id=THREAD, run_id="r1", seq=0, ts=1, message_id="t1", delta="hm"
    )
    end = ev.ReasoningEnd(session_id=THREAD, run_id="r1", seq=0, ts=1, message_id="t1")
    wire = _run(start, delta, end, end=_finished(stop_reason="end_turn"))
    assert [f["type"] for f in wire[1:6]] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]


def test_empty_deltas_and_invalid_patches_fall_back_to_custom() -> None:
    empty = ev.TextDelta(session_id=THREAD, run_id="r1", seq=0, ts=1, message_id="m", delta="")
    patch = ev.StateDelta(session_id=THREAD, run_id="r1", seq=0, ts=1, patch_json='{"op":1}')
    wire = _run(empty, patch, end=_finished(stop_reason="end_turn"))
    assert [f.get("name") for f in wire[1:3]] == ["steerable.text_delta", "steerable.state_delta"]


def test_non_canonical_state_text_is_kept_exactly() -> None:
    snap = ev.StateSnapshot(session_id=THREAD, run_id="r1", seq=0, ts=1, state_json='{"a": 1}')
    move = ev.StateDelta(
        session_id=THREAD,
        run_id="r1",
        seq=0,
        ts=1,
        patch_json='[{"op":"move","path":"/b","from":"/a"}]',
    )
    events = _fix(
        [
            ev.RunStarted(session_id=THREAD, run_id="r1", seq=0, ts=5, model="demo"),
            snap,
            move,
            _finished(stop_reason="end_turn"),
        ]
    )
    wire = _render(events)
    assert wire[2]["delta"] == [{"op": "move", "from": "/a", "path": "/b"}]
    assert decode(wire) == events


def test_tool_results_get_their_own_message_ids() -> None:
    results = [
        ev.ToolFinished(session_id=THREAD, run_id="r1", seq=0, ts=1, call_id=c, status="completed")
        for c in ("c1", "c2")
    ]
    wire = _run(*results, end=_finished(stop_reason="end_turn"))
    ids = [f["messageId"] for f in wire if f["type"] == "TOOL_CALL_RESULT"]
    assert ids == ["result-c1", "result-c2"]
    assert json.dumps(wire).count('"role": "tool"') == 2
