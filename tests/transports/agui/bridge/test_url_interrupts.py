"""`acp --agui-url` with servers that are not ours: an interrupt carrying a url question
(`metadata: {mode: url, url}`) is asked in url mode when the editor shows urls, and since
such a server sends no completion of its own, the question is completed when the resumed
run ends without asking it again; one the editor cannot open is the approval naming it."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    Interrupt,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import QuestionMode
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
from steerable_bridge.runtime.ports.port import Attachments
from steerable_bridge.runtime.ports.questions import QuestionAnswer, QuestionRequest
from tests.transports.agui.bridge.engine_kit import Bridged, Frame, bridged

pytestmark = pytest.mark.anyio

PAGE = "https://example.com/consent"
START = RunStartedEvent(thread_id="t", run_id="r")
ANSWER_SCHEMA = {"type": "object", "properties": {"action": {"enum": ["accept", "decline"]}}}


def _interrupted(url: str) -> list[Frame]:
    item = Interrupt(
        id="consent-1",
        reason="Approve access",
        response_schema=ANSWER_SCHEMA,
        metadata={"mode": "url", "url": url},
    )
    outcome = RunFinishedInterruptOutcome(interrupts=[item])
    return [START, RunFinishedEvent(thread_id="t", run_id="r", outcome=outcome)]


DONE: list[Frame] = [
    START,
    TextMessageStartEvent(message_id="m2", role="assistant"),
    TextMessageContentEvent(message_id="m2", delta="Connected."),
    TextMessageEndEvent(message_id="m2"),
    RunFinishedEvent(thread_id="t", run_id="r"),
]


async def _open(bridge: Bridged, modes: frozenset[QuestionMode], asked: list[Any]) -> str:
    async def questioner(request: QuestionRequest) -> QuestionAnswer:
        asked.append(request)
        return QuestionAnswer(action="accept")

    async def asker(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request)
        return PermissionAnswer(outcome="allow_once", option_id="allow_once")

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(asker=asker, questioner=questioner, question_modes=modes)

    return (await bridge.port.open("/tmp", attach=attach)).conversation_id


async def test_a_foreign_url_question_is_completed_when_its_resumed_run_ends() -> None:
    bridge = bridged([_interrupted(PAGE), DONE])
    asked: list[Any] = []
    sid = await _open(bridge, frozenset({"form", "url"}), asked)
    outcome, events = await bridge.turn(sid, "connect")
    assert outcome.stop_reason == "end_turn"
    (request,) = asked
    assert isinstance(request, QuestionRequest)
    assert (request.mode, request.url, request.question_id) == ("url", PAGE, "consent-1")
    assert bridge.inputs[1]["resume"] == [
        {"interruptId": "consent-1", "status": "resolved", "payload": {"action": "accept"}}
    ]
    order = [e.kind for e in events if e.kind.startswith(("question", "text_delta"))]
    assert order == ["question_asked", "question_answered", "text_delta", "question_completed"]
    (done,) = [e for e in events if isinstance(e, ev.QuestionCompleted)]
    assert done.question_id == "consent-1"


async def test_an_editor_that_cannot_be_asked_gets_the_approval_naming_the_page() -> None:
    bridge = bridged([_interrupted(PAGE), DONE])
    asked: list[Any] = []

    async def asker(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request)
        return PermissionAnswer(outcome="allow_once", option_id="allow_once")

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(asker=asker, questions=False)

    sid = (await bridge.port.open("/tmp", attach=attach)).conversation_id
    _, events = await bridge.turn(sid, "connect")
    (request,) = asked
    assert isinstance(request, PermissionRequest) and PAGE in (request.title or "")
    assert bridge.inputs[1]["resume"][0]["payload"] == {"action": "accept"}
    assert not [e for e in events if isinstance(e, ev.QuestionCompleted)]  # no elicitation


async def test_a_url_nobody_should_open_is_never_a_url_question() -> None:
    bridge = bridged([_interrupted("javascript:alert(1)"), DONE])
    asked: list[Any] = []
    sid = await _open(bridge, frozenset({"form", "url"}), asked)
    _, events = await bridge.turn(sid, "connect")
    (request,) = asked
    assert isinstance(request, PermissionRequest)  # asked as the approval it also is
    assert "javascript:" not in (request.title or "")
    assert not [e for e in events if isinstance(e, ev.QuestionAsked | ev.QuestionCompleted)]
