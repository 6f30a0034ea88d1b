"""`AcpQuestioner` on its own: what a client's answer, error or silence becomes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.ports.questions import QuestionRequest
from steerable_bridge.transports.acp.questions import AcpQuestioner, can_ask, form_schema

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

REQUEST = QuestionRequest(
    session_id="s1",
    question_id="question-c1",
    message="Which?",
    schema_json='{"type":"object","properties":{"n":{"type":"integer"}}}',
    call_id="c1",
)


class Conn:
    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        if self.reply == "hang":
            await anyio.sleep_forever()
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.mark.parametrize(
    ("reply", "action", "content"),
    [
        (acp.AcceptElicitationResponse(action="accept", content={"n": 3}), "accept", '{"n":3}'),
        (acp.AcceptElicitationResponse(action="accept"), "accept", None),
        (acp.DeclineElicitationResponse(action="decline"), "decline", None),
        (acp.OtherElicitationResponse(action="_later"), "cancel", None),
        (RequestError.internal_error({"why": "x"}), "cancel", None),
        (ConnectionError("gone"), "cancel", None),
        ("hang", "cancel", None),
    ],
)
async def test_each_reply_maps_to_an_action(reply: Any, action: str, content: str | None) -> None:
    answer = await AcpQuestioner(Conn(reply), "s1", timeout_s=0.05)(REQUEST)
    assert (answer.action, answer.content_json) == (action, content)


def test_only_a_client_that_advertised_forms_is_asked() -> None:
    forms = acp.ElicitationCapabilities(form=acp.ElicitationFormCapabilities())
    assert can_ask(acp.ClientCapabilities(elicitation=forms))
    assert not can_ask(acp.ClientCapabilities(elicitation=acp.ElicitationCapabilities()))
    assert not can_ask(acp.ClientCapabilities())
    assert not can_ask(None)


def test_a_form_with_an_unknown_field_type_is_refused() -> None:
    with pytest.raises(ValueError, match="no form renders"):
        form_schema('{"type":"object","properties":{"x":{"type":"object"}}}')
    assert form_schema(REQUEST.schema_json or "").properties


def test_question_modes_are_the_modes_the_client_advertised() -> None:
    from steerable_bridge.transports.acp.questions import question_modes

    form, url = acp.ElicitationFormCapabilities(), acp.ElicitationUrlCapabilities()
    both = acp.ClientCapabilities(elicitation=acp.ElicitationCapabilities(form=form, url=url))
    only_url = acp.ClientCapabilities(elicitation=acp.ElicitationCapabilities(url=url))
    assert question_modes(both) == {"form", "url"}
    assert question_modes(only_url) == {"url"} and can_ask(only_url)
    assert question_modes(acp.ClientCapabilities()) == frozenset()
