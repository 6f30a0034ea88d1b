"""ACP extensions and the spec methods the SDK does not route, answered for `AcpAgent`.

- `_steerable/steer` `{sessionId, text}` → `{taken, reason}`: queue a message for the
  running turn's next step boundary (`AgentPort.steer`, which reaches a turn another
  process runs too); `taken: false` when idle.
- `_steerable/follow_up` `{sessionId, text}` → `{taken, reason}`: queue a message the
  running turn takes when it would otherwise end (`AgentPort.follow_up`); `taken: false`
  when idle. Both are advertised in `initialize`'s `agentCapabilities._meta.steerable`.
- `session/delete`, `logout` and `$/cancel_request` arrive here renamed under `GAP_PREFIX`
  (see `server.py`): delete goes to the agent, logout is refused with the reason, and
  `$/cancel_request` cancels the `session/prompt` whose request id it names (any other id
  is ignored, as JSON-RPC allows).
Unknown extension methods get "method not found" naming what exists; unknown extension
notifications are logged and dropped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from acp import RequestError

from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp import errors

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.port import AgentPort
    from steerable_bridge.transports.acp.session import AcpSession

__all__ = ["GAP_PREFIX", "ExtensionHost", "Extensions"]

log = logging.getLogger("steerable_bridge.acp")

GAP_PREFIX = "steerable.sdk/"
"""Extension name under which `server.py` delivers methods the SDK does not route."""


class ExtensionHost(Protocol):
    """What the extensions reach on the ACP agent (`AcpAgent` in `agent.py`); naming it here
    keeps this module from importing the agent module, which imports this one."""

    port: AgentPort
    sessions: dict[str, AcpSession]

    def state(self, session_id: str) -> AcpSession: ...

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]: ...


class Extensions:
    """Extension requests and notifications of one ACP agent."""

    def __init__(self, agent: ExtensionHost, prompt_requests: dict[Any, str]) -> None:
        self._agent = agent
        self._prompt_requests = prompt_requests

    async def method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "steerable/steer":
            return await self._queue(params, "steer")
        if method == "steerable/follow_up":
            return await self._queue(params, "follow_up")
        if method == GAP_PREFIX + "session/delete":
            return await self._agent.delete_session(params)
        if method == GAP_PREFIX + "logout":
            raise errors.not_supported(
                "logout",
                "logout is not supported: steerable-bridge keeps no login; its model keys come"
                " from environment variables, so remove them from the agent's settings instead",
            )
        if method == GAP_PREFIX + "$/cancel_request":
            self._cancel_request(params)
            return {}
        raise RequestError(
            errors.METHOD_NOT_FOUND,
            f"there is no extension method _{method}; this agent offers _steerable/steer"
            " and _steerable/follow_up",
            {"code": "method_not_found", "method": f"_{method}"},
        )

    def notification(self, method: str, params: dict[str, Any]) -> None:
        if method == GAP_PREFIX + "$/cancel_request":
            self._cancel_request(params)
        else:
            log.info("ignoring extension notification _%s", method)

    def _cancel_request(self, params: dict[str, Any]) -> None:
        request_id = params.get("id")
        if not isinstance(request_id, str | int | float):  # a list or object is no request id
            log.debug("$/cancel_request with an id that is no request id: %r", request_id)
            return
        session_id = self._prompt_requests.get(request_id)
        if session_id is None:
            log.debug("$/cancel_request for %r: no prompt in flight with that id", params.get("id"))
            return
        state = self._agent.sessions.get(session_id)
        if state is not None and state.token is not None:
            state.token.cancel("cancelled by the client ($/cancel_request)")

    async def _queue(self, params: dict[str, Any], kind: str) -> dict[str, Any]:
        session_id, text = params.get("sessionId"), params.get("text")
        if not isinstance(session_id, str) or not isinstance(text, str) or not text:
            raise errors.invalid_params(
                f"_steerable/{kind} needs {{sessionId: string, text: non-empty string}}",
                stable=f"invalid_{kind}",
            )
        self._agent.state(session_id)  # an open session, or session_not_found
        content = (TextPart(text=text),)
        port = self._agent.port
        queue = port.steer if kind == "steer" else port.follow_up
        taken = await queue(session_id, content, None)
        return {
            "taken": taken,
            "reason": None if taken else "no prompt is running; send it as a prompt instead",
        }
