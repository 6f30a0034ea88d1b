"""The ACP questioner: puts the model's question to the person through `elicitation/create`.

`AcpQuestioner(conn, session_id, timeout_s)` is the `Questioner` a session gets when the
client advertised `clientCapabilities.elicitation.form` or `.url` (ACP stable since schema
1.21; the SDK's `create_elicitation`); `question_modes` says which. A form question becomes
a form-mode, session-scoped request: `sessionId`, `toolCallId` (the `ask_user` call),
`message` and `requestedSchema` (the form, checked against the SDK's `ElicitationSchema`:
a flat object whose properties are string / number / integer / boolean / string
multi-select schemas). A url question becomes a url-mode, session-scoped request:
`sessionId`, `toolCallId`, `message`, `elicitationId` (`elicitation_id`: the session id
and the question id, `<sessionId>/question-<call_id>`, so that it is unique on the
connection as `elicitation/complete` needs: that notification names no session) and `url`;
once it is over the session sends `elicitation/complete` for that id (`AcpSession`, on the
`question_completed` event). The client's answer maps one to
one: `accept` (with `content`; for a url: consent to open it), `decline`, `cancel`; an
action the spec does not define yet, a client error, a dropped connection or no answer
within `timeout_s` count as `cancel` (the spec: never assume an elicitation succeeded).
`announced(id)` gives the `question_asked` LoopEvent the loop logged; it rides in the
request's `_meta.steerable.event` so decoders rebuild it exactly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

import anyio
from acp import RequestError
from acp import schema as acp
from pydantic import ValidationError

from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent, QuestionMode
from steerable_bridge.runtime.ports.questions import QuestionAnswer, QuestionRequest
from steerable_bridge.runtime.values import canonical_json

__all__ = [
    "AcpQuestioner",
    "QuestionClient",
    "answer_of",
    "can_ask",
    "elicitation_id",
    "form_schema",
    "question_modes",
]

log = logging.getLogger("steerable_bridge.acp")


class QuestionClient(Protocol):
    """The part of the SDK's `AgentSideConnection` the questioner needs."""

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any: ...


def question_modes(capabilities: acp.ClientCapabilities | None) -> frozenset[QuestionMode]:
    """The elicitation modes the client advertised (`elicitation.form` / `.url` present)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return frozenset()
    modes: set[QuestionMode] = set()
    if elicitation.form is not None:
        modes.add("form")
    if elicitation.url is not None:
        modes.add("url")
    return frozenset(modes)


def elicitation_id(session_id: str, question_id: str) -> str:
    """The `elicitationId` of a url question: unique on the connection, not only the session."""
    return f"{session_id}/{question_id}"


def can_ask(capabilities: acp.ClientCapabilities | None) -> bool:
    """True when the client advertised any elicitation mode (form or url)."""
    return bool(question_modes(capabilities))


def form_schema(schema_json: str) -> acp.ElicitationSchema:
    """The SDK model of a question's form; raises `ValueError` for anything that is not a
    flat object of known primitive properties (the spec's form shape)."""
    try:
        schema = acp.ElicitationSchema.model_validate(json.loads(schema_json))
    except (ValidationError, ValueError) as error:
        raise ValueError(f"the form is not an elicitation schema: {error}") from None
    for name, field in (schema.properties or {}).items():
        if isinstance(field, acp.ElicitationOtherPropertySchema):
            raise ValueError(f"property {name!r} has type {field.type!r}, which no form renders")
    return schema


class AcpQuestioner:
    """Asks the ACP client; one per session."""

    def __init__(
        self,
        conn: QuestionClient,
        session_id: str,
        *,
        timeout_s: float,
        announced: Callable[[str], LoopEvent | None] | None = None,
    ) -> None:
        self._conn = conn
        self._session_id = session_id
        self._timeout_s = timeout_s
        self._announced = announced

    def _mode(self, request: QuestionRequest) -> acp.ElicitationMode:
        """The request's SDK mode; raises `ValueError` for a question no mode can carry."""
        if request.mode == "url" and request.url is not None:
            try:
                return acp.ElicitationUrlSessionMode(
                    session_id=self._session_id,
                    tool_call_id=request.call_id,
                    elicitation_id=elicitation_id(self._session_id, request.question_id),
                    url=request.url,  # pydantic parses the text
                )
            except ValidationError as error:
                raise ValueError(f"the url is not one a client opens: {error}") from None
        if request.mode != "form" or request.schema_json is None:
            raise ValueError("the question has neither a form nor a url")
        return acp.ElicitationFormSessionMode(
            session_id=self._session_id,
            tool_call_id=request.call_id,
            requested_schema=form_schema(request.schema_json),
        )

    async def __call__(self, request: QuestionRequest) -> QuestionAnswer:
        try:
            mode = self._mode(request)
        except ValueError as error:
            log.warning("question %s: %s", request.question_id, error)
            return QuestionAnswer(action="cancel")
        event = self._announced(request.question_id) if self._announced is not None else None
        meta: dict[str, Any] = (
            {"steerable": {"event": codec.event_to_jsonable(event)}} if event is not None else {}
        )
        try:
            with anyio.fail_after(self._timeout_s):
                response = await self._conn.create_elicitation(
                    message=request.message, mode=mode, **meta
                )
        except TimeoutError:
            log.warning(
                "question %s got no answer within %gs; treating it as cancelled",
                request.question_id,
                self._timeout_s,
            )
            return QuestionAnswer(action="cancel")
        except (RequestError, ConnectionError, ValidationError) as error:
            log.warning("question %s failed: %s", request.question_id, error)
            return QuestionAnswer(action="cancel")
        return answer_of(response)


def answer_of(response: object) -> QuestionAnswer:
    """The runtime's answer for the client's `elicitation/create` response."""
    if isinstance(response, acp.AcceptElicitationResponse):
        content = response.content
        return QuestionAnswer(
            action="accept", content_json=canonical_json(content) if content is not None else None
        )
    if isinstance(response, acp.DeclineElicitationResponse):
        return QuestionAnswer(action="decline")
    if not isinstance(response, acp.CancelElicitationResponse):
        log.warning("the client answered a question with an unknown action; treating it as cancel")
    return QuestionAnswer(action="cancel")
