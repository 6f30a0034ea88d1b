"""The thread as AG-UI messages: ids match the streamed events, calls hang off their parent
message, results and the plan are their own messages."""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import PlanEntry, TextPart, ToolError
from steerable_bridge.transports.agui.history import MessageFold, known_ids, thread_messages


def _log(*events: Any) -> list[ev.LoopEvent]:
    return [e(seq=i) for i, e in enumerate(events)]


def _e(cls: type[ev.EventBase], **fields: Any) -> Any:
    return lambda seq: cls(session_id="t", run_id="r", seq=seq, ts=1, **fields)


def _turn(n: int) -> list[Any]:
    return [
        _e(ev.UserMessage, message_id=f"u{n}", content=(TextPart(text="hi"),)),
        _e(ev.ReasoningStart, message_id=f"th{n}"),
        _e(ev.ReasoningDelta, message_id=f"th{n}", delta="hmm"),
        _e(ev.TextStart, message_id=f"m{n}"),
        _e(ev.TextDelta, message_id=f"m{n}", delta="Let me "),
        _e(ev.TextDelta, message_id=f"m{n}", delta="check."),
        _e(ev.ToolCallStart, call_id=f"c{n}", name="calc", parent_message_id=f"m{n}"),
        _e(ev.ToolCallDelta, call_id=f"c{n}", delta='{"a"'),
        _e(ev.ToolCallEnd, call_id=f"c{n}", name="calc", arguments_json='{"a":1}'),
        _e(ev.PlanUpdated, entries=(PlanEntry(content=f"step {n}"),)),
        _e(
            ev.ToolFinished,
            call_id=f"c{n}",
            status="failed",
            content=(TextPart(text="no"),),
            error=ToolError(code="x", message="it failed"),
        ),
        _e(ev.ToolCallStart, call_id=f"d{n}", name="show", parent_message_id=f"m{n}"),
        _e(ev.ToolCallEnd, call_id=f"d{n}", name="show", arguments_json="{}"),
        _e(ev.TextDelta, message_id=f"m{n}", delta=" Done."),
    ]


def test_a_fold_kept_open_gives_what_a_fold_from_scratch_gives_after_every_event() -> None:
    log = _log(*_turn(1), *_turn(2))
    fold = MessageFold("t")
    kept: dict[str, Any] = {}
    for i, event in enumerate(log):
        fold.event(event)
        messages = fold.messages()
        fresh = thread_messages("t", log[: i + 1])
        assert [m.model_dump(by_alias=True) for m in messages] == [
            m.model_dump(by_alias=True) for m in fresh
        ]
        dumped = [m.model_dump_json(by_alias=True) for m in fresh]
        assert b"".join(fold.snapshot_json(messages)) == ",".join(dumped).encode()
        kept_pieces = b"".join(fold.snapshot_json(messages))  # from what it kept
        assert kept_pieces == ",".join(dumped).encode()
        for message, again in zip(messages, fresh, strict=True):
            assert fold.json_of(message) == again.model_dump_json(by_alias=True)
            if kept.get(message.id) is message:  # the same object: unchanged since the last
                assert message.model_dump() == again.model_dump()
            kept[message.id] = message
    assert fold.messages()[0] is fold.messages()[0]  # what no event changed is not rebuilt
    assert fold.ids() == known_ids(fold.messages())
    learned: set[str] = set()
    mark = (0, 0)
    for event in _log(*_turn(3), *_turn(4)):
        fold.event(event)
        learned.update(fold.ids_since(mark))
        mark = fold.mark()
    assert learned | known_ids(thread_messages("t", log)) == known_ids(fold.messages())
    other = thread_messages("t", log)[0]
    assert fold.json_of(other) == other.model_dump_json(by_alias=True)  # not its own: dumped
    stale = fold.messages()
    fold.event(_e(ev.TextDelta, message_id=stale[-1].id, delta=" more"))
    joined = ",".join(m.model_dump_json(by_alias=True) for m in stale).encode()
    assert b"".join(fold.snapshot_json(stale)) == joined


def test_a_turn_with_reasoning_text_a_call_its_result_and_a_plan() -> None:
    log = _log(
        _e(ev.UserMessage, message_id="u1", content=(TextPart(text="hi"),)),
        _e(ev.ReasoningStart, message_id="th"),
        _e(ev.ReasoningDelta, message_id="th", delta="hmm"),
        _e(ev.TextStart, message_id="m1"),
        _e(ev.TextDelta, message_id="m1", delta="Let me "),
        _e(ev.TextDelta, message_id="m1", delta="check."),
        _e(ev.ToolCallStart, call_id="c1", name="calc", parent_message_id="m1"),
        _e(ev.ToolCallDelta, call_id="c1", delta='{"a"'),
        _e(ev.ToolCallEnd, call_id="c1", name="calc", arguments_json='{"a":1}'),
        _e(ev.PlanUpdated, entries=(PlanEntry(content="step"),)),
        _e(
            ev.ToolFinished,
            call_id="c1",
            status="failed",
            content=(TextPart(text="no"),),
            error=ToolError(code="x", message="it failed"),
        ),
        _e(ev.ToolCallStart, call_id="c2", name="show", parent_message_id="m2"),
        _e(ev.ToolCallEnd, call_id="c2", name="show", arguments_json="{}"),
    )
    messages = [m.model_dump(by_alias=True, exclude_none=True) for m in thread_messages("t", log)]
    assert messages == [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "th", "role": "reasoning", "content": "hmm"},
        {
            "id": "m1",
            "role": "assistant",
            "content": "Let me check.",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"a":1}'},
                }
            ],
        },
        {
            "id": "plan-t",
            "role": "activity",
            "activityType": "plan",
            "content": {
                "entries": [{"content": "step", "priority": "medium", "status": "pending"}]
            },
        },
        {
            "id": "result-c1",
            "role": "tool",
            "content": "no",
            "toolCallId": "c1",
            "error": "it failed",
        },
        {
            "id": "m2",
            "role": "assistant",
            "toolCalls": [
                {"id": "c2", "type": "function", "function": {"name": "show", "arguments": "{}"}}
            ],
        },
    ]
    assert known_ids(thread_messages("t", log)) >= {"u1", "m1", "c1", "result-c1", "c2", "plan-t"}
