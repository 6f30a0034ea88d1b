"""Url questions: `ask_user` with a page to open, asked in url mode when the client shows
urls (accept → `question_completed` before the result), as a yes/no form when it shows only
forms, deferred as an interrupt carrying the url, and refused for pages nobody can open."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import QuestionAction, QuestionMode
from steerable_bridge.runtime.ports.port import Attachments
from steerable_bridge.runtime.ports.questions import (
    ASK_USER_NAME,
    CONFIRM_SCHEMA,
    QuestionAnswer,
    QuestionRequest,
    url_problem,
)
from steerable_bridge.runtime.turns.turn import QuestionReply, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

PAGE = "https://example.com/oauth/consent?state=abc"


def _ask(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": "q1", "name": ASK_USER_NAME, "arguments": arguments}]}


BOTH: frozenset[QuestionMode] = frozenset({"form", "url"})
URL_ONLY: frozenset[QuestionMode] = frozenset({"url"})
FORM_ONLY: frozenset[QuestionMode] = frozenset({"form"})
OPEN = _ask(message="Grant read access, then come back.", url=PAGE)


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


def _result(events: list[ev.LoopEvent]) -> ev.ToolFinished:
    return next(e for e in events if isinstance(e, ev.ToolFinished) and e.call_id == "q1")


def _text(finished: ev.ToolFinished) -> str:
    return "".join(getattr(part, "text", "") for part in finished.content)


async def _asking(
    answer: QuestionAnswer, modes: frozenset[QuestionMode], *rounds: dict[str, Any]
) -> tuple[LocalPort, str, list[QuestionRequest], list[ev.LoopEvent]]:
    asked: list[QuestionRequest] = []

    async def questioner(request: QuestionRequest) -> QuestionAnswer:
        asked.append(request)
        return answer

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(questioner=questioner, question_modes=modes)

    port = _port(*rounds)
    cid = (await port.open("/tmp", attach=attach)).conversation_id
    return port, cid, asked, await _run(port, cid)


async def test_an_accepted_url_question_completes_before_the_model_reads_the_result() -> None:
    modes = BOTH
    port, cid, asked, seen = await _asking(QuestionAnswer(action="accept"), modes, OPEN)
    (request,) = asked
    assert (request.mode, request.url, request.schema_json) == ("url", PAGE, None)
    assert request.question_id == "question-q1" and request.call_id == "q1"
    kinds = [e.kind for e in seen if e.kind.startswith("question") or e.kind == "tool_finished"]
    assert kinds == ["question_asked", "question_answered", "question_completed", "tool_finished"]
    (question,) = [e for e in seen if isinstance(e, ev.QuestionAsked)]
    assert (question.mode, question.url, question.schema_json) == ("url", PAGE, None)
    (done,) = [e for e in seen if isinstance(e, ev.QuestionCompleted)]
    assert (done.question_id, done.call_id) == ("question-q1", "q1")
    assert PAGE in _text(_result(seen)) and '"action":"accept"' in _text(_result(seen))
    stored = await port.events_after(cid)
    mine = [e for e in stored if e.kind.startswith("question")]
    assert mine == [e for e in seen if e.kind.startswith("question")]
    assert [codec.event_from_json(codec.event_to_json(e)) for e in mine] == mine


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_url_question_not_accepted_never_completes(action: QuestionAction) -> None:
    modes = URL_ONLY
    _, _, _, seen = await _asking(QuestionAnswer(action=action), modes, OPEN)
    assert not [e for e in seen if isinstance(e, ev.QuestionCompleted)]
    assert f'"action":"{action}"' in _text(_result(seen))


async def test_a_client_without_url_mode_gets_a_yes_no_form_with_the_page() -> None:
    answer = QuestionAnswer(action="accept", content_json='{"done":true}')
    _, _, asked, seen = await _asking(answer, FORM_ONLY, OPEN)
    (request,) = asked
    assert (request.mode, request.url, request.schema_json) == ("form", None, CONFIRM_SCHEMA)
    assert PAGE in request.message and request.message.startswith("Grant read access")
    assert not [e for e in seen if isinstance(e, ev.QuestionCompleted)]
    assert '"content":{"done":true}' in _text(_result(seen))


async def test_a_client_with_only_url_mode_refuses_forms_with_a_remedy() -> None:
    form = _ask(
        message="Which?", schema={"type": "object", "properties": {"a": {"type": "string"}}}
    )
    _, _, asked, seen = await _asking(QuestionAnswer(action="accept"), URL_ONLY, form)
    assert asked == []
    finished = _result(seen)
    assert finished.status == "failed" and finished.error is not None
    assert (
        finished.error.code == "invalid_arguments" and "ask in your reply" in finished.error.message
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"message": "Open it", "url": "javascript:alert(1)"},
        {"message": "Open it", "url": "file:///etc/passwd"},
        {"message": "Open it", "url": "https://user:pw@example.com/"},
        {"message": "Both", "url": PAGE, "schema": {"properties": {"a": {"type": "string"}}}},
        {"message": "Neither"},
    ],
)
async def test_a_url_nobody_can_open_is_refused_and_nothing_is_asked(
    arguments: dict[str, Any],
) -> None:
    _, _, asked, seen = await _asking(
        QuestionAnswer(action="accept"),
        BOTH,
        _ask(**arguments),
    )
    assert asked == [] and not [e for e in seen if isinstance(e, ev.QuestionAsked)]
    finished = _result(seen)
    assert finished.error is not None and finished.error.code == "invalid_arguments"
    assert "ask_user" in finished.error.message


def test_url_problem_takes_http_and_https_pages_only() -> None:
    assert url_problem("https://example.com/a?b=c") is None
    assert url_problem("http://127.0.0.1:8080/") is None
    for bad in ("", "example.com", "ftp://example.com/", "https://", "https://a b.com/", 3):
        assert url_problem(bad) is not None, bad


async def test_a_deferred_url_question_is_an_interrupt_with_the_url_and_completes_on_accept() -> (
    None
):
    port = _port(OPEN)
    cid = (await port.open("/tmp")).conversation_id
    first = await _run(port, cid)
    finished = first[-1]
    assert isinstance(finished, ev.RunFinished) and finished.stop_reason == "interrupted"
    (interrupt,) = finished.interrupts
    assert (interrupt.id, interrupt.url, interrupt.tool_call_id) == ("question-q1", PAGE, "q1")
    schema = json.loads(interrupt.response_schema_json or "")
    assert set(schema["properties"]) == {"action"}
    reply = QuestionReply(question_id="question-q1", answer=QuestionAnswer(action="accept"))
    second = await _run(port, cid, "", answers=(reply,))
    kinds = [e.kind for e in second if e.kind.startswith("question") or e.kind == "tool_finished"]
    assert kinds == ["question_answered", "question_completed", "tool_finished"]
    assert PAGE in _text(_result(second))
