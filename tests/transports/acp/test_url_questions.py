"""End-to-end: the model's `ask_user` with a url becomes a url-mode `elicitation/create` to
an ACP client that advertised url elicitation, and `elicitation/complete` for its id once the
person accepted; a client that shows only forms gets a yes/no form with the page instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from tests.transports.acp.harness import Recorder, running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60), pytest.mark.slow]

PAGE = "https://example.com/oauth/authorize?client_id=abc&state=xyz"
OPEN = {
    "tool_calls": [
        {
            "id": "q1",
            "name": "ask_user",
            "arguments": {"message": "Authorize read access, then come back.", "url": PAGE},
        }
    ]
}
DONE = {"text": "done"}
URLS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(
        form=acp.ElicitationFormCapabilities(), url=acp.ElicitationUrlCapabilities()
    )
)
FORMS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(form=acp.ElicitationFormCapabilities())
)


class Opener(Recorder):
    """A client that answers questions with `reply` and records completions."""

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply
        self.questions: list[tuple[str, Any, dict[str, Any]]] = []
        self.completed: list[tuple[str, dict[str, Any]]] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.questions.append((message, mode, kwargs))
        return self.reply

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        self.completed.append((elicitation_id, kwargs))


def _result_text(run: Any) -> str:
    final = [
        u
        for u in run.client.updates_of("tool_call_update")
        if u.tool_call_id == "q1" and u.status in ("completed", "failed")
    ][-1]
    return "".join(getattr(c.content, "text", "") for c in final.content or ())


async def test_an_accepted_url_question_is_asked_in_url_mode_and_completed(
    tmp_path: Path,
) -> None:
    client = Opener(acp.AcceptElicitationResponse(action="accept"))
    async with running(tmp_path, [OPEN, DONE], client=client) as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=URLS)
        sid = await run.new()
        response = await run.prompt(sid, "read my repos")
        incoming = run.incoming()
    assert response.stop_reason == "end_turn"
    ((message, mode, meta),) = client.questions
    assert message == "Authorize read access, then come back."
    assert isinstance(mode, acp.ElicitationUrlSessionMode)
    assert (mode.session_id, mode.tool_call_id) == (sid, "q1")
    assert mode.elicitation_id == f"{sid}/question-q1"  # unique on the connection
    assert str(mode.url) == PAGE
    asked = codec.event_from_jsonable(meta["steerable"]["event"])
    assert isinstance(asked, ev.QuestionAsked) and (asked.mode, asked.url) == ("url", PAGE)
    ((elicitation_id, complete_meta),) = client.completed
    assert elicitation_id == mode.elicitation_id
    done = codec.event_from_jsonable(complete_meta["steerable"]["event"])
    assert isinstance(done, ev.QuestionCompleted) and done.call_id == "q1"
    methods = [m.get("method") for m in incoming]
    completed_at = methods.index("elicitation/complete")
    result_at = next(
        i
        for i, m in enumerate(incoming)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("status") == "completed"
    )
    assert methods.index("elicitation/create") < completed_at < result_at
    assert PAGE in _result_text(run) and '"action":"accept"' in _result_text(run)


async def test_a_declined_url_question_is_never_completed(tmp_path: Path) -> None:
    client = Opener(acp.DeclineElicitationResponse(action="decline"))
    async with running(tmp_path, [OPEN, DONE], client=client) as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=URLS)
        sid = await run.new()
        await run.prompt(sid, "read my repos")
        incoming = run.incoming()
    assert len(client.questions) == 1 and client.completed == []
    assert not any(m.get("method") == "elicitation/complete" for m in incoming)
    assert '"action":"decline"' in _result_text(run)


async def test_a_client_without_url_mode_gets_a_yes_no_form_with_the_page(
    tmp_path: Path,
) -> None:
    client = Opener(acp.AcceptElicitationResponse(action="accept", content={"done": True}))
    async with running(tmp_path, [OPEN, DONE], client=client) as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=FORMS)
        sid = await run.new()
        await run.prompt(sid, "read my repos")
    ((message, mode, _),) = client.questions
    assert isinstance(mode, acp.ElicitationFormSessionMode) and PAGE in message
    assert set((mode.requested_schema.properties or {}).keys()) == {"done"}
    assert client.completed == []
    assert '"content":{"done":true}' in _result_text(run)
