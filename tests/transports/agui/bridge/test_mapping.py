"""What the bridge records from servers that are not ours: each AG-UI event kind as the
LoopEvents an editor is shown, robust to snapshots, chunks, legacy THINKING_* events,
unknown events, reused ids, frontend tools, interrupts without a tool call, bad patches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from ag_ui.core import (
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RawEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import PlanEntry, TextPart
from tests.transports.agui.bridge.engine_kit import bridged, kinds, sse

pytestmark = pytest.mark.anyio

START = RunStartedEvent(thread_id="t", run_id="r")
DONE = RunFinishedEvent(thread_id="t", run_id="r")


def _answer(message_id: str, text: str) -> list[object]:
    return [
        START,
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
        DONE,
    ]


async def test_a_foreign_stream_becomes_the_events_an_editor_shows() -> None:
    frames = [
        START,
        MessagesSnapshotEvent(messages=[UserMessage(id="x", content="old")]),
        StepStartedEvent(step_name="agent"),
        json.dumps({"type": "THINKING_START"}),
        json.dumps({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"}),
        json.dumps({"type": "THINKING_END"}),
        json.dumps({"type": "FANCY_FUTURE_EVENT", "x": 1}),
        "not json at all",
        TextMessageChunkEvent(message_id="m1", delta="Let me "),
        TextMessageChunkEvent(delta="check."),
        ToolCallStartEvent(tool_call_id="k1", tool_call_name="lookup"),
        ToolCallArgsEvent(tool_call_id="k1", delta='{"q":'),
        ToolCallArgsEvent(tool_call_id="k1", delta='"x"}'),
        ToolCallEndEvent(tool_call_id="k1"),
        ToolCallResultEvent(message_id="res", tool_call_id="k1", content="found it"),
        StateSnapshotEvent(snapshot={"steps": [{"description": "look", "status": "executing"}]}),
        StateDeltaEvent(delta=[{"op": "replace", "path": "/steps/0/status", "value": "done"}]),
        CustomEvent(name="langgraph.node", value={"n": 1}),
        RawEvent(event={"whatever": True}),
        RunFinishedEvent(
            thread_id="t",
            run_id="r",
            usage=[TokenUsage(input_tokens=12, output_tokens=5, total_tokens=17)],
        ),
    ]
    bridge = bridged([frames])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "look x up")
    assert outcome.stop_reason == "end_turn"
    assert kinds(events) == [
        "run_started", "user_message", "session_info",
        "reasoning_start", "reasoning_delta", "reasoning_end",
        "text_start", "text_delta", "text_delta", "text_end",
        "tool_call_start", "tool_call_delta", "tool_call_delta", "tool_call_end",
        "tool_started", "tool_finished",
        "state_snapshot", "plan_updated", "state_delta", "plan_updated",
        "run_finished",
    ]  # fmt: skip
    by_kind = {e.kind: e for e in events}
    assert isinstance(by_kind["reasoning_delta"], ev.ReasoningDelta)
    assert by_kind["reasoning_delta"].delta == "hmm"
    call = by_kind["tool_call_start"]
    assert isinstance(call, ev.ToolCallStart) and call.parent_message_id == "m1"
    end = by_kind["tool_call_end"]
    assert isinstance(end, ev.ToolCallEnd) and end.arguments_json == '{"q":"x"}'
    result = by_kind["tool_finished"]
    assert isinstance(result, ev.ToolFinished) and result.status == "completed"
    assert result.content == (TextPart(text="found it"),)
    plans = [e.entries for e in events if isinstance(e, ev.PlanUpdated)]
    assert plans == [
        (PlanEntry(content="look", status="in_progress"),),
        (PlanEntry(content="look", status="completed"),),
    ]
    assert outcome.usage.prompt_tokens == 12 and outcome.usage.completion_tokens == 5


async def test_the_second_run_carries_the_conversation_and_reused_ids_stay_apart() -> None:
    bridge = bridged([_answer("m1", "Paris."), _answer("m1", "Rome.")])
    sid = await bridge.open()
    await bridge.turn(sid, "capital of France?")
    _, events = await bridge.turn(sid, "and Italy?")
    sent = [(m["role"], m.get("content")) for m in bridge.inputs[1]["messages"]]
    assert sent == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and Italy?"),
    ]
    assert (
        bridge.inputs[1]["threadId"] == sid
        and bridge.inputs[0]["runId"] != bridge.inputs[1]["runId"]
    )
    second = [e for e in events if isinstance(e, ev.TextStart)]
    assert [e.message_id for e in second] == ["m1~2"]  # the server's m1 was already taken
    history = await bridge.port.events_after(sid)
    texts = [e.delta for e in history if isinstance(e, ev.TextDelta)]
    assert texts == ["Paris.", "Rome."]


async def test_run_error_fails_the_turn_with_the_servers_message_and_code() -> None:
    frames = [
        START,
        TextMessageStartEvent(message_id="m", role="assistant"),
        TextMessageContentEvent(message_id="m", delta="partial"),
        RunErrorEvent(message="the quota is exhausted", code="rate_limited"),
    ]
    bridge = bridged([frames])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "hi")
    assert (outcome.error_code, outcome.error_message) == ("rate_limited", "the quota is exhausted")
    assert kinds(events)[-2:] == ["text_end", "run_failed"]  # nothing left open


async def test_a_frontend_tool_call_gets_a_result_saying_an_editor_cannot_run_it() -> None:
    frames = [
        START,
        ToolCallStartEvent(tool_call_id="f1", tool_call_name="change_background"),
        ToolCallArgsEvent(tool_call_id="f1", delta='{"color":"red"}'),
        ToolCallEndEvent(tool_call_id="f1"),
        RunFinishedEvent(
            thread_id="t",
            run_id="r",
            outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["f1"]),
        ),
    ]
    bridge = bridged([frames])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "make it red")
    finished = [e for e in events if isinstance(e, ev.ToolFinished)]
    assert outcome.stop_reason == "end_turn"
    assert len(finished) == 1 and finished[0].status == "failed"
    assert finished[0].error is not None and finished[0].error.code == "frontend_tool"
    assert "cannot run it" in finished[0].error.message


async def test_an_interrupt_without_a_tool_call_is_asked_and_resumed() -> None:
    question = Interrupt(
        id="int-7",
        reason="confirm",
        message="Book the flight?",
        response_schema={"type": "object", "properties": {"confirmed": {"type": "boolean"}}},
    )
    first = [
        START,
        RunFinishedEvent(
            thread_id="t", run_id="r", outcome=RunFinishedInterruptOutcome(interrupts=[question])
        ),
    ]
    bridge = bridged([first, _answer("m2", "Booked.")])
    sid = await bridge.open("allow_once")
    outcome, events = await bridge.turn(sid, "book it")
    assert outcome.stop_reason == "end_turn"
    assert [r.title for r in bridge.asked] == ["Book the flight?"]
    resume = bridge.inputs[1]["resume"]
    assert resume == [
        {"interruptId": "int-7", "status": "resolved", "payload": {"confirmed": True}}
    ]
    assert bridge.inputs[1]["parentRunId"] == bridge.inputs[0]["runId"]
    assert "permission_requested" in kinds(events) and "permission_resolved" in kinds(events)
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["Booked."]


async def test_an_always_answer_is_remembered_for_the_next_interrupt() -> None:
    def approval(call_id: str) -> list[object]:
        return [
            START,
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name="deploy"),
            ToolCallEndEvent(tool_call_id=call_id),
            RunFinishedEvent(
                thread_id="t",
                run_id="r",
                outcome=RunFinishedInterruptOutcome(
                    interrupts=[
                        Interrupt(id=f"approval-{call_id}", reason="ok?", tool_call_id=call_id)
                    ]
                ),
            ),
        ]

    result = [START, ToolCallResultEvent(message_id="r", tool_call_id="d1", content="ok"), DONE]
    bridge = bridged([approval("d1"), result, approval("d2"), _answer("m", "deployed")])
    sid = await bridge.open("allow_always")
    await bridge.turn(sid, "deploy")
    await bridge.turn(sid, "deploy again")
    assert len(bridge.asked) == 1  # the second approval came from the remembered answer
    assert bridge.inputs[3]["resume"][0]["payload"] == {"approved": True}


async def test_a_patch_that_does_not_apply_is_skipped_not_fatal() -> None:
    frames = [
        START,
        StateDeltaEvent(delta=[{"op": "replace", "path": "/missing/deep", "value": 1}]),
        *_answer("m", "fine")[1:],
    ]
    bridge = bridged([frames])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "hi")
    assert outcome.stop_reason == "end_turn" and "state_delta" not in kinds(events)


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (httpx.Response(200, json={"ok": True}), "agui_bad_response", "not an event stream"),
        (
            httpx.Response(401, json={"message": "bad token"}),
            "agui_bad_response",
            "HTTP 401: bad token; it wants credentials",
        ),
        (
            httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b""),
            "agui_incomplete_run",
            "without RUN_FINISHED",
        ),
    ],
)
async def test_a_bad_answer_is_one_clear_failure(
    reply: httpx.Response, code: str, words: str
) -> None:
    bridge = bridged([lambda body: reply])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "hi")
    assert outcome.error_code == code and words in (outcome.error_message or "")
    assert kinds(events)[-1] == "run_failed"


async def test_steering_sent_during_a_run_goes_out_as_the_next_run() -> None:
    holder: list[str] = []

    def first(body: dict[str, object]) -> httpx.Response:
        session = bridge.port.agent.get(holder[0])
        assert session is not None and session.steer((TextPart(text="also Spain"),), "s1")
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse(_answer("a", "Paris."))
        )

    bridge = bridged([first, _answer("b", "Madrid.")])
    holder.append(await bridge.open())
    outcome, events = await bridge.turn(holder[0], "capital of France?")
    assert outcome.stop_reason == "end_turn" and len(bridge.inputs) == 2
    assert bridge.inputs[1]["messages"][-1] == {"id": "s1", "role": "user", "content": "also Spain"}
    assert "steer_applied" in kinds(events)
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["Paris.", "Madrid."]


async def test_a_thread_still_busy_with_its_last_run_is_retried() -> None:
    busy = httpx.Response(409, json={"message": "thread t is already running"})
    bridge = bridged([lambda body: busy, _answer("m", "ok")])
    sid = await bridge.open()
    outcome, events = await bridge.turn(sid, "hi")
    assert outcome.stop_reason == "end_turn" and len(bridge.inputs) == 2
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["ok"]


async def test_a_run_that_never_ends_fails_at_the_run_deadline() -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield sse([START])
        await anyio.Event().wait()  # the server sends nothing more, ever
        yield b""  # pragma: no cover

    def forever(body: dict[str, object]) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    bridge = bridged([forever], run_timeout_s=0.5)
    sid = await bridge.open()
    with anyio.fail_after(10):
        outcome, events = await bridge.turn(sid, "hi")
    assert outcome.error_code == "agui_timeout" and "--agui-timeout" in (
        outcome.error_message or ""
    )
    assert kinds(events)[-1] == "run_failed"


async def test_a_langgraph_on_interrupt_is_asked_and_answered_in_forwarded_props() -> None:
    first = [
        START,
        CustomEvent(name="on_interrupt", value=json.dumps({"question": "Proceed with step 2?"})),
        DONE,
    ]
    bridge = bridged([first, _answer("m", "Proceeding.")])
    sid = await bridge.open("allow_once")
    outcome, events = await bridge.turn(sid, "plan it")
    assert outcome.stop_reason == "end_turn"
    assert [r.title for r in bridge.asked] == ["Proceed with step 2?"]
    second = bridge.inputs[1]
    assert second["forwardedProps"] == {"command": {"resume": {"approved": True}}}
    assert "resume" not in second
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["Proceeding."]


def _far(cls: type[ev.EventBase], seq: int, **fields: object) -> CustomEvent:
    """A CUSTOM event our own far server sends: the whole LoopEvent of its own log."""
    from steerable_bridge.runtime.encoding import codec

    event = cls(session_id="far", run_id="far-run", seq=seq, ts=1, **fields)
    value = codec.event_to_jsonable(event)  # type: ignore[arg-type]
    return CustomEvent(name=f"steerable.{value['kind']}", value=value)


async def test_our_far_servers_streamed_compaction_reaches_the_editor_piece_by_piece() -> None:
    from steerable_bridge.transports.acp.renderer import AcpRenderer

    pieces = ["The user", " asked twice;", " answered."]
    compacting = [
        START,
        _far(ev.CompactionStarted, 40, compaction_id="k1", trigger="pressure"),
        *(
            _far(ev.CompactionSummaryDelta, 41 + i, compaction_id="k1", delta=p)
            for i, p in enumerate(pieces)
        ),
        _far(
            ev.Compaction,
            44,
            compaction_id="k1",
            summary="".join(pieces),
            through_seq=39,
            trigger="pressure",
            pre_tokens=900,
            post_tokens=200,
            turns=2,
        ),
        *_answer("m2", "Rome.")[1:],
    ]
    bridge = bridged([_answer("m1", "Paris."), compacting])
    sid = await bridge.open()
    await bridge.turn(sid, "capital of France?")
    _, events = await bridge.turn(sid, "and Italy?")
    ours = [e for e in events if e.kind.startswith("compaction")]
    assert kinds(ours) == ["compaction_started", *["compaction_summary_delta"] * 3, "compaction"]
    started, *deltas, done = ours
    assert isinstance(done, ev.Compaction) and isinstance(started, ev.CompactionStarted)
    assert done.compaction_id == started.compaction_id == "k1"
    assert done.summary == "".join(p.delta for p in deltas)  # type: ignore[attr-defined]
    assert (done.pre_tokens, done.post_tokens, done.turns) == (900, 200, 2)
    assert done.through_seq == started.seq - 1  # what the bridge's own log held before it
    updates = [u for e in events for u in AcpRenderer(compaction=True).render(e)]
    chunks = [u for u in updates if u.session_update == "compaction_summary_chunk"]
    assert [c.content.root.text for c in chunks] == pieces  # type: ignore[union-attr]
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["Rome."]


async def test_a_far_compaction_the_run_left_open_is_dropped() -> None:
    frames = [
        START,
        _far(ev.CompactionStarted, 5, compaction_id="k1", trigger="manual"),
        _far(ev.CompactionSummaryDelta, 6, compaction_id="k1", delta="half"),
        CustomEvent(name="steerable.compaction_summary_delta", value={"not": "an event"}),
        DONE,
    ]
    bridge = bridged([frames])
    sid = await bridge.open()
    _, events = await bridge.turn(sid, "hi")
    ours = [e for e in events if e.kind.startswith("compaction")]
    assert kinds(ours) == ["compaction_started", "compaction_summary_delta", "compaction_dropped"]
    assert isinstance(ours[-1], ev.CompactionDropped) and ours[-1].reason == "failed"
