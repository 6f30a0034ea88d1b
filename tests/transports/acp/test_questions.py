"""End-to-end: the model's `ask_user` becomes `elicitation/create` to an ACP client that
advertised form elicitation; its accept / decline / cancel is the call's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from tests.transports.acp.harness import Recorder, running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60), pytest.mark.slow]

SCHEMA = {
    "type": "object",
    "properties": {
        "size": {"type": "string", "enum": ["small", "large"]},
        "copies": {"type": "integer"},
    },
    "required": ["size"],
}
ASK = {
    "tool_calls": [
        {"id": "q1", "name": "ask_user", "arguments": {"message": "Which size?", "schema": SCHEMA}}
    ]
}
DONE = {"text": "done"}
FORMS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(form=acp.ElicitationFormCapabilities())
)


class Asked(Recorder):
    """A client that answers questions with `reply`."""

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply
        self.questions: list[tuple[str, Any, dict[str, Any]]] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.questions.append((message, mode, kwargs))
        return self.reply


def _result_text(run: Any) -> str:
    final = [
        u
        for u in run.client.updates_of("tool_call_update")
        if u.tool_call_id == "q1" and u.status in ("completed", "failed")
    ][-1]
    return "".join(getattr(c.content, "text", "") for c in final.content or ())


@pytest.mark.parametrize(
    ("reply", "seen"),
    [
        (
            acp.AcceptElicitationResponse(action="accept", content={"size": "large", "copies": 2}),
            '{"action":"accept","content":{"size":"large","copies":2}}',
        ),
        (acp.DeclineElicitationResponse(action="decline"), '{"action":"decline"}'),
        (acp.CancelElicitationResponse(action="cancel"), '{"action":"cancel"}'),
    ],
)
async def test_a_form_question_reaches_the_client_and_its_answer_the_model(
    tmp_path: Path, reply: Any, seen: str
) -> None:
    client = Asked(reply)
    async with running(tmp_path, [ASK, DONE], client=client) as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=FORMS)
        sid = await run.new()
        response = await run.prompt(sid, "make a poster")
    assert response.stop_reason == "end_turn"
    ((message, mode, meta),) = client.questions
    assert message == "Which size?"
    assert isinstance(mode, acp.ElicitationFormSessionMode)
    assert (mode.session_id, mode.tool_call_id) == (sid, "q1")
    assert mode.requested_schema.model_dump(mode="json", exclude_none=True) == SCHEMA
    carried = codec.event_from_jsonable(meta["steerable"]["event"])
    assert isinstance(carried, ev.QuestionAsked) and carried.question_id == "question-q1"
    assert seen in _result_text(run)


async def test_a_client_without_form_elicitation_is_never_asked(tmp_path: Path) -> None:
    client = Asked(acp.CancelElicitationResponse(action="cancel"))
    async with running(tmp_path, [ASK, DONE], client=client) as run:
        await run.conn.initialize(protocol_version=1)
        sid = await run.new()
        await run.prompt(sid, "make a poster")
    assert client.questions == []
    assert "there is no tool named 'ask_user'" in _result_text(run)
    assert not any(e.get("method") == "elicitation/create" for e in run.incoming())
