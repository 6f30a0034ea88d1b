"""The model's `ask_user` questions: asked at once through a questioner, or deferred to the
client's next run, and the answer (accept / decline / cancel) is what the model reads."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.port import Attachments
from steerable_bridge.runtime.ports.questions import (
    ASK_USER_NAME,
    QuestionAnswer,
    QuestionRequest,
    answer_text,
    content_problem,
    form_problem,
)
from steerable_bridge.runtime.turns.turn import QuestionReply, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "blue"]}},
    "required": ["color"],
}
ASK = {
    "tool_calls": [
        {"id": "q1", "name": ASK_USER_NAME, "arguments": {"message": "Which?", "schema": SCHEMA}}
    ]
}


def _port(*rounds: dict[str, Any]) -> LocalPort:
    return LocalPort(make_agent(scripted(*rounds, {"text": "done"}, loop=True)))


async def _run(port: LocalPort, cid: str, text: str = "go", **turn: Any) -> list[ev.LoopEvent]:
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)

    content = (TextPart(text=text),) if text else ()
    with anyio.fail_after(10):
        await port.prompt(cid, TurnInput(content=content, **turn), sink)
    return seen


def _offered(events: list[ev.LoopEvent]) -> set[str]:
    request = next(e for e in events if isinstance(e, ev.ModelRequestEvent)).request
    return {tool.name for tool in request.tools}


def _result_text(events: list[ev.LoopEvent]) -> str:
    finished = next(e for e in events if isinstance(e, ev.ToolFinished) and e.call_id == "q1")
    assert finished.status == "completed"
    return "".join(getattr(part, "text", "") for part in finished.content)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (QuestionAnswer(action="accept", content_json='{"color":"blue"}'), '"content":{"color"'),
        (QuestionAnswer(action="decline"), '"action":"decline"'),
        (QuestionAnswer(action="cancel"), '"action":"cancel"'),
    ],
)
async def test_a_questioner_is_asked_and_the_model_reads_its_answer(
    answer: QuestionAnswer, expected: str
) -> None:
    asked: list[QuestionRequest] = []

    async def questioner(request: QuestionRequest) -> QuestionAnswer:
        asked.append(request)
        return answer

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(questioner=questioner)

    port = _port(ASK)
    cid = (await port.open("/tmp", attach=attach)).conversation_id
    seen = await _run(port, cid)
    assert ASK_USER_NAME in _offered(seen)
    assert [(r.message, json.loads(r.schema_json or "")) for r in asked] == [("Which?", SCHEMA)]
    (question,) = [e for e in seen if isinstance(e, ev.QuestionAsked)]
    (answered,) = [e for e in seen if isinstance(e, ev.QuestionAnswered)]
    assert (question.call_id, question.mode, question.question_id) == ("q1", "form", "question-q1")
    assert answered.action == answer.action and answered.question_id == question.question_id
    assert expected in _result_text(seen)
    second = [e for e in seen if isinstance(e, ev.ModelRequestEvent)][1].request
    (tool_message,) = [m for m in second.messages if m.tool_call_id == "q1"]
    assert expected in "".join(getattr(part, "text", "") for part in tool_message.content)
    assert isinstance(seen[-1], ev.RunFinished) and seen[-1].stop_reason == "end_turn"
    replayed = await port.events_after(cid)
    assert [e.kind for e in replayed if e.kind.startswith("question")] == [
        "question_asked",
        "question_answered",
    ]


async def test_without_a_questioner_the_question_is_an_interrupt_answered_next_run() -> None:
    port = _port(ASK)
    cid = (await port.open("/tmp")).conversation_id
    seen = await _run(port, cid)
    finished = seen[-1]
    assert isinstance(finished, ev.RunFinished) and finished.stop_reason == "interrupted"
    (interrupt,) = finished.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == (
        "question-q1",
        "Which?",
        "q1",
    )
    answer_schema = json.loads(interrupt.response_schema_json or "")
    assert answer_schema["properties"]["content"] == SCHEMA
    assert (await port.load(cid)).open_calls == ("q1",)
    reply = QuestionReply(
        question_id="question-q1",
        answer=QuestionAnswer(action="accept", content_json='{"color":"red"}'),
    )
    seen = await _run(port, cid, "", answers=(reply,))
    (answered,) = [e for e in seen if isinstance(e, ev.QuestionAnswered)]
    assert (answered.action, answered.content_json) == ("accept", '{"color":"red"}')
    assert '"color":"red"' in _result_text(seen)
    assert isinstance(seen[-1], ev.RunFinished) and seen[-1].stop_reason == "end_turn"


async def test_a_deferred_question_left_unanswered_is_cancelled_by_the_next_message() -> None:
    port = _port(ASK)
    cid = (await port.open("/tmp")).conversation_id
    await _run(port, cid)
    seen = await _run(port, cid, "never mind")
    (answered,) = [e for e in seen if isinstance(e, ev.QuestionAnswered)]
    assert answered.action == "cancel"
    assert '"action":"cancel"' in _result_text(seen)


async def test_a_conversation_that_cannot_ask_offers_no_ask_user_tool() -> None:
    async def attach(conversation_id: str) -> Attachments:
        return Attachments(questions=False)

    port = _port(ASK)
    cid = (await port.open("/tmp", attach=attach)).conversation_id
    seen = await _run(port, cid)
    assert ASK_USER_NAME not in _offered(seen)
    finished = next(e for e in seen if isinstance(e, ev.ToolFinished))
    assert finished.error is not None and finished.error.code == "unknown_tool"


async def test_a_questioner_that_never_answers_is_cut_off_and_the_model_is_told() -> None:
    async def silent(request: QuestionRequest) -> QuestionAnswer:
        await anyio.sleep_forever()
        raise AssertionError

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(questioner=silent)

    port = LocalPort(
        make_agent(scripted(ASK, {"text": "ok"}, loop=True), permission_timeout_s=0.05)
    )
    cid = (await port.open("/tmp", attach=attach)).conversation_id
    seen = await _run(port, cid)
    (answered,) = [e for e in seen if isinstance(e, ev.QuestionAnswered)]
    assert answered.action == "cancel"
    assert "nobody answered" in _result_text(seen)


async def test_a_schema_that_is_not_a_flat_form_is_refused_with_a_remedy() -> None:
    nested = {"type": "object", "properties": {"who": {"type": "object", "properties": {}}}}
    bad = {"tool_calls": [{"id": "q1", "name": ASK_USER_NAME,
                           "arguments": {"message": "?", "schema": nested}}]}  # fmt: skip
    port = _port(bad)
    cid = (await port.open("/tmp")).conversation_id
    seen = await _run(port, cid)
    finished = next(e for e in seen if isinstance(e, ev.ToolFinished))
    assert finished.error is not None and finished.error.code == "invalid_arguments"
    assert not [e for e in seen if isinstance(e, ev.QuestionAsked)]


def test_form_problem_names_what_is_wrong() -> None:
    assert form_problem(SCHEMA) is None
    assert form_problem({"type": "array"}) is not None
    assert "required" in (form_problem({"properties": {}, "required": ["x"]}) or "")
    multi = {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    assert form_problem(multi) is None
    assert answer_text(QuestionAnswer(action="accept")) == '{"action":"accept","content":{}}'


def test_content_problem_checks_the_answer_against_the_form() -> None:
    schema = json.dumps(SCHEMA)
    assert content_problem(schema, '{"color":"red"}') is None
    assert "required" in (content_problem(schema, "{}") or "")
    assert "one of" in (content_problem(schema, '{"color":"green"}') or "")
    assert "not a field" in (content_problem(schema, '{"color":"red","x":1}') or "")
    counted = json.dumps({"properties": {"n": {"type": "integer"}}})
    assert content_problem(counted, '{"n":true}') is not None
    assert content_problem(counted, '{"n":2}') is None


async def test_an_answer_that_strays_from_the_form_is_flagged_to_the_model() -> None:
    port = _port(ASK)
    cid = (await port.open("/tmp")).conversation_id
    await _run(port, cid)
    wrong = QuestionAnswer(action="accept", content_json='{"color":"green"}')
    reply = QuestionReply(question_id="question-q1", answer=wrong)
    seen = await _run(port, cid, "", answers=(reply,))
    assert "does not follow the form" in _result_text(seen)
