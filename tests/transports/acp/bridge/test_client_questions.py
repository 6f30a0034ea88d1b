"""The bridge's client side for the child's questions: what arrives outside a prompt or
without a session is cancelled at once; one inside a prompt waits for the engine's answer,
which maps to the SDK's accept / decline / cancel responses."""

from __future__ import annotations

import anyio
import pytest
from acp import schema as acp

from steerable_bridge.runtime.ports.questions import QuestionAnswer
from steerable_bridge.transports.acp.bridge.client import BridgeClient, Completed, Questioned
from steerable_bridge.transports.acp.bridge.workspace import ChildWorkspace, client_capabilities

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

FORM = acp.ElicitationSchema(properties={"n": acp.ElicitationIntegerPropertySchema(type="integer")})


def _client() -> BridgeClient:
    return BridgeClient(ChildWorkspace(None, None), answer_timeout_s=5)


async def test_a_question_outside_a_prompt_or_a_session_is_cancelled_at_once() -> None:
    client = _client()
    session_mode = acp.ElicitationFormSessionMode(session_id="s1", requested_schema=FORM)
    request_mode = acp.ElicitationFormRequestMode(request_id=7, requested_schema=FORM)
    for mode in (session_mode, request_mode):
        answer = await client.create_elicitation(message="?", mode=mode)
        assert isinstance(answer, acp.CancelElicitationResponse)


async def test_a_question_in_a_prompt_waits_for_the_engines_answer() -> None:
    client = _client()
    stream = client.session("s1").open_prompt()
    mode = acp.ElicitationFormSessionMode(session_id="s1", tool_call_id="c1", requested_schema=FORM)
    got: list[object] = []

    async def ask() -> None:
        got.append(await client.create_elicitation(message="How many?", mode=mode))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask)
        item = await stream.receive()
        assert isinstance(item, Questioned) and item.message == "How many?"
        item.reply(QuestionAnswer(action="accept", content_json='{"n":3}'))
    (answer,) = got
    assert isinstance(answer, acp.AcceptElicitationResponse) and answer.content == {"n": 3}


def test_replies_map_to_the_sdk_responses_and_only_the_first_counts() -> None:
    declined = Questioned(message="?", mode=None)
    declined.reply(QuestionAnswer(action="decline"))
    declined.reply(QuestionAnswer(action="accept"))
    assert isinstance(declined.answer, acp.DeclineElicitationResponse)
    cancelled = Questioned(message="?", mode=None)
    cancelled.reply(None)
    assert isinstance(cancelled.answer, acp.CancelElicitationResponse)


def test_the_bridge_offers_form_and_url_elicitation() -> None:
    caps = client_capabilities(ChildWorkspace(None, None))
    assert caps.elicitation is not None
    assert caps.elicitation.form is not None and caps.elicitation.url is not None


async def test_a_url_completion_goes_to_the_prompt_of_the_session_that_asked() -> None:
    client = _client()
    stream = client.session("s1").open_prompt()
    mode = acp.ElicitationUrlSessionMode(
        session_id="s1", tool_call_id="c1", elicitation_id="e1", url="https://example.com/a"
    )

    async def ask() -> None:
        await client.create_elicitation(message="Open it", mode=mode)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask)
        item = await stream.receive()
        assert isinstance(item, Questioned)
        item.reply(QuestionAnswer(action="accept"))
    await client.complete_elicitation(elicitation_id="e1")
    await client.complete_elicitation(elicitation_id="e1")  # again: no session knows it now
    await client.complete_elicitation(elicitation_id="never-asked")
    assert stream.receive_nowait() == Completed("e1")
    with pytest.raises(anyio.WouldBlock):
        stream.receive_nowait()
