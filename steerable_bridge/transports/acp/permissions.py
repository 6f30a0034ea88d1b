"""The ACP permission asker: puts a tool call to the person through `session/request_permission`.

`AcpPermissionAsker(conn, session_id, timeout_s)` is the `Asker` a session's `ModePolicy`
calls after the mode said "ask". It sends the call (id, readable title, kind, raw input)
with the runtime's four options and maps the client's answer back: a selected option →
that option's kind (`allow_always` / `reject_always` are then remembered by the loop, in
the log), `cancelled` → `cancelled` (the model is told the request was withdrawn). A
client that never answers is cut off after `timeout_s`; a client error or a dropped
connection count as withdrawn. When the turn is cancelled (`session/cancel`), the loop
cancels the wait and the SDK forgets the request, which is how a pending request is
withdrawn on our side. `announced(call_id)` gives the `permission_requested` LoopEvent the
loop logged for the call; it rides in the request's `_meta.steerable.event`, so decoders
rebuild it exactly. This module never decides anything itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

import anyio
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest

__all__ = ["AcpPermissionAsker", "PermissionClient"]

log = logging.getLogger("steerable_bridge.acp")


class PermissionClient(Protocol):
    """The part of the SDK's `AgentSideConnection` the asker needs."""

    async def request_permission(
        self,
        session_id: str,
        tool_call: acp.ToolCallUpdate,
        options: list[acp.PermissionOption],
        **kwargs: Any,
    ) -> acp.RequestPermissionResponse: ...


def _raw(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text


class AcpPermissionAsker:
    """Asks the ACP client; one per session."""

    def __init__(
        self,
        conn: PermissionClient,
        session_id: str,
        *,
        timeout_s: float,
        announced: Callable[[str], LoopEvent | None] | None = None,
    ) -> None:
        self._conn = conn
        self._session_id = session_id
        self._timeout_s = timeout_s
        self._announced = announced

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        tool_call = acp.ToolCallUpdate(
            tool_call_id=request.call.call_id,
            title=request.title or request.call.name,
            kind=request.tool_kind,
            status="pending",
            raw_input=_raw(request.call.arguments_json),
        )
        options = [
            acp.PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind)
            for o in request.options
        ]
        kinds = {o.option_id: o.kind for o in request.options}
        event = self._announced(request.call.call_id) if self._announced is not None else None
        meta: dict[str, Any] = (
            {"steerable": {"event": codec.event_to_jsonable(event)}} if event is not None else {}
        )
        try:
            with anyio.fail_after(self._timeout_s):
                response = await self._conn.request_permission(
                    session_id=self._session_id, tool_call=tool_call, options=options, **meta
                )
        except TimeoutError:
            log.warning(
                "permission request for %s got no answer within %gs; treating it as withdrawn",
                request.call.call_id,
                self._timeout_s,
            )
            return PermissionAnswer(outcome="cancelled")
        except (RequestError, ConnectionError) as error:
            log.warning("permission request for %s failed: %s", request.call.call_id, error)
            return PermissionAnswer(outcome="cancelled")
        outcome = response.outcome
        if isinstance(outcome, acp.AllowedOutcome):
            kind = kinds.get(outcome.option_id)
            if kind is None:
                log.warning(
                    "the client picked option %r, which was not offered; treating it as reject",
                    outcome.option_id,
                )
                return PermissionAnswer(outcome="reject_once", option_id=outcome.option_id)
            return PermissionAnswer(outcome=kind, option_id=outcome.option_id)
        return PermissionAnswer(outcome="cancelled")
