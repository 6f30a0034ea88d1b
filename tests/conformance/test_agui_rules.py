"""Each AG-UI rule accepts a valid stream and catches the one break made for it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from steerable_bridge.conformance import (
    ConformanceError,
    assert_valid_agui_stream,
    check_agui_stream,
)
from steerable_bridge.conformance.agui_rules import AGUI_RULES
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import Message, TextPart
from steerable_bridge.transports.agui.requests import RequestChain

Stream = list[dict[str, Any]]


def _requests() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two CUSTOM model requests of thread t1 as the renderer sends them: the first whole,
    the next by reference to it."""
    said = [Message(id=f"u{i}", role="user", content=(TextPart(text=f"m{i}"),)) for i in (1, 2)]
    tools = (ToolSpec(name="calc", description="adds", parameters_json="{}"),)
    chain = RequestChain()
    out = []
    for seq, messages in ((1, said[:1]), (9, said)):
        request = ModelRequest(model="m", system="be brief", messages=tuple(messages), tools=tools)
        event = ev.ModelRequestEvent(
            session_id="t1", run_id="r", seq=seq, ts=1, step=1, request=request
        )
        value = json.loads(chain.value_json(event))
        out.append({"type": "CUSTOM", "name": "steerable.model_request", "value": value})
    return out[0], out[1]


def valid_stream() -> Stream:
    first, second = _requests()
    return [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": 1},
        {"type": "STEP_STARTED", "stepName": "step-1"},
        {"type": "REASONING_START", "messageId": "th1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "th1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "th1", "delta": "hmm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "th1"},
        {"type": "REASONING_END", "messageId": "th1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "calc"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "res-c1", "toolCallId": "c1", "content": "4"},
        {"type": "STEP_FINISHED", "stepName": "step-1"},
        first,
        {"type": "CUSTOM", "name": "steerable.x", "value": None},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1", "outcome": {"type": "success"}},
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "q1"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "q1",
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "question-c2",
                        "reason": "Open it",
                        "metadata": {"mode": "url", "url": "https://example.com/a"},
                    }
                ],
            },
        },
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "q2"},
        {
            "type": "CUSTOM",
            "name": "steerable.question_completed",
            "value": {"question_id": "question-c2"},
        },
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "q2", "outcome": {"type": "success"}},
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2"},
        second,
        {"type": "RUN_ERROR", "message": "boom", "code": "provider_error"},
    ]


def _by_reference(stream: Stream) -> dict[str, Any]:
    event = next(e for e in stream if "request_ref" in (e.get("value") or {}))
    ref: dict[str, Any] = event["value"]["request_ref"]
    return ref


def _index(stream: Stream, kind: str) -> int:
    return next(i for i, e in enumerate(stream) if e["type"] == kind)


def _drop(kind: str) -> Callable[[Stream], None]:
    def edit(stream: Stream) -> None:
        del stream[_index(stream, kind)]

    return edit


def _insert_before(kind: str, event: dict[str, Any]) -> Callable[[Stream], None]:
    def edit(stream: Stream) -> None:
        stream.insert(_index(stream, kind), event)

    return edit


def _set(kind: str, key: str, value: Any) -> Callable[[Stream], None]:
    def edit(stream: Stream) -> None:
        stream[_index(stream, kind)][key] = value

    return edit


def _url_finished(stream: Stream) -> int:
    return next(i for i, e in enumerate(stream) if e.get("runId") == "q1" and "outcome" in e)


def _append(event: dict[str, Any]) -> Callable[[Stream], None]:
    return lambda stream: stream.append(event)


BREAKS: dict[str, Callable[[Stream], None]] = {
    "agui.schema": _set("RUN_STARTED", "timestamp", 1.5),
    "agui.unknown-field": _set("TEXT_MESSAGE_END", "messageID", "m1"),
    "agui.null-field": _set("TOOL_CALL_START", "parentMessageId", None),
    "agui.first-event": lambda s: s.insert(0, {"type": "STEP_STARTED", "stepName": "x"}),
    "agui.after-terminal": _append({"type": "CUSTOM", "name": "late", "value": 1}),
    "agui.one-terminal": _drop("RUN_ERROR"),
    "agui.run-id": _set("RUN_FINISHED", "runId", "other"),
    "agui.text-open": _insert_before(
        "TEXT_MESSAGE_CONTENT", {"type": "TEXT_MESSAGE_START", "messageId": "m1"}
    ),
    "agui.text-not-open": _drop("TEXT_MESSAGE_START"),
    "agui.tool-open": _insert_before(
        "TOOL_CALL_ARGS", {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "x"}
    ),
    "agui.tool-not-open": _drop("TOOL_CALL_START"),
    "agui.reasoning-open": _insert_before(
        "REASONING_MESSAGE_END", {"type": "REASONING_MESSAGE_START", "messageId": "th1"}
    ),
    "agui.reasoning-not-open": _drop("REASONING_MESSAGE_START"),
    "agui.step-open": _insert_before(
        "STEP_FINISHED", {"type": "STEP_STARTED", "stepName": "step-1"}
    ),
    "agui.step-not-open": _drop("STEP_STARTED"),
    "agui.open-at-finish": _drop("TEXT_MESSAGE_END"),
    "agui.result-unknown-call": _set("TOOL_CALL_RESULT", "toolCallId", "c9"),
    "agui.result-id-reused": _set("TOOL_CALL_RESULT", "messageId", "m1"),
    "agui.url-interrupt": lambda s: s[_url_finished(s)]["outcome"]["interrupts"][0][
        "metadata"
    ].update(url="file:///etc/passwd"),
    "agui.question-completed": lambda s: s.insert(
        _index(s, "RUN_ERROR"),
        {
            "type": "CUSTOM",
            "name": "steerable.question_completed",
            "value": {"question_id": "question-c2"},
        },
    ),
    # the tools it names are not the ones the request it refers to held
    "agui.model-request": lambda s: _by_reference(s).update(tools="0" * 16),
}


def test_the_valid_stream_has_no_findings() -> None:
    assert check_agui_stream(valid_stream()) == []
    assert_valid_agui_stream(valid_stream())


def test_every_rule_has_a_break() -> None:
    assert set(BREAKS) == {rule.id for rule in AGUI_RULES}


@pytest.mark.parametrize("rule_id", sorted(BREAKS))
def test_each_rule_catches_its_break(rule_id: str) -> None:
    stream = copy.deepcopy(valid_stream())
    BREAKS[rule_id](stream)
    findings = check_agui_stream(stream)
    assert rule_id in {f.rule_id for f in findings}, findings
    with pytest.raises(ConformanceError) as caught:
        assert_valid_agui_stream(stream)
    assert rule_id in {f.rule_id for f in caught.value.findings}
    assert f"[{rule_id}]" in str(caught.value)


def test_a_completion_for_a_question_resumed_in_the_input_is_valid() -> None:
    stream: Stream = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "CUSTOM", "name": "steerable.question_completed",
         "value": {"question_id": "question-q1"}},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]  # fmt: skip
    resumed = {"threadId": "t1", "runId": "r1", "state": {}, "messages": [], "tools": [],
               "context": [], "forwardedProps": {},
               "resume": [{"interruptId": "question-q1", "status": "resolved",
                           "payload": {"action": "accept"}}]}  # fmt: skip
    assert [f.rule_id for f in check_agui_stream(stream)] == ["agui.question-completed"]
    assert check_agui_stream(stream, run_input=resumed) == []


def test_a_result_for_a_call_sent_in_the_input_is_valid() -> None:
    stream = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TOOL_CALL_RESULT", "messageId": "res", "toolCallId": "old", "content": "ok"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    assert [f.rule_id for f in check_agui_stream(stream)] == ["agui.result-unknown-call"]
    run_input = {
        "threadId": "t",
        "runId": "r",
        "messages": [
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {"id": "old", "type": "function", "function": {"name": "f", "arguments": ""}}
                ],
            }
        ],
    }
    assert check_agui_stream(stream, run_input=run_input) == []


def test_findings_say_where() -> None:
    stream = valid_stream()
    del stream[_index(stream, "TEXT_MESSAGE_START")]
    finding = next(f for f in check_agui_stream(stream) if f.rule_id == "agui.text-not-open")
    assert finding.where == "event 7 (TEXT_MESSAGE_CONTENT)"
    assert "'m1'" in finding.message
