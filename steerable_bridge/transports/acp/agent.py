"""The ACP agent: every ACP method, wired to the agent port.

`AcpAgent` is a plain class the SDK's `AgentSideConnection` routes to (it deliberately does
not subclass `acp.Agent`, a Protocol whose defaults would answer unknown methods with empty
results). It reaches the agent only through an `AgentPort` (`runtime/ports/port.py`: our runtime
behind `LocalPort`, or a bridged agent), and holds one `ClientLink` and, per open session,
an `AcpSession` (see `session.py`); LoopEvents go out through `AcpSession.emit` inside the
request, so nothing is sent after a prompt's response. `choose_environment` (called
whenever a session is opened: new, load, resume, fork) is the hook where a session's
workspace environment is picked from the client's capabilities; the default leaves the
agent's own. Opening, loading, resuming, forking, listing and closing sessions live in
`lifecycle.py` (`SessionLifecycle`, which `AcpAgent` extends); here are the connection,
modes and models, and `session/prompt`: the conversation is reserved (a second prompt is
refused as busy), the ACP content blocks become the runtime's parts (`content.py`), the
turn runs through `AgentPort.prompt`, and each LoopEvent goes back as a `session/update`
through `AcpSession.emit` and `AcpRenderer`; the run's closing event rides in the
response's `_meta` (`RunOutcome.final_event`).
Slash commands (/help, /mode, /model, `COMMANDS`) are answered by `slash.py` without a model
turn. Methods the SDK has no route for reach `ext_method` / `ext_notification` under
`GAP_PREFIX` (see `server.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp import PROTOCOL_VERSION
from acp import schema as acp

from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.runtime.ports.port import AgentPort, Conversation, Reservation
from steerable_bridge.runtime.ports.storage import SessionBusy, StoreError
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.capabilities import (
    CREDENTIALS_METHOD,
    LOGIN_METHOD,
    initialize_response,
)
from steerable_bridge.transports.acp.client_env import AcpWorkspaces
from steerable_bridge.transports.acp.content import PromptBlock, ReadText, prompt_parts
from steerable_bridge.transports.acp.extensions import GAP_PREFIX, Extensions
from steerable_bridge.transports.acp.lifecycle import SessionLifecycle
from steerable_bridge.transports.acp.renderer import (
    model_options,
    stop_reason,
)
from steerable_bridge.transports.acp.sdk_private import raw_notify
from steerable_bridge.transports.acp.session import (
    AcpSession,
    ClientLink,
    EnvironmentChooser,
    keep_runtime_environment,
)
from steerable_bridge.transports.acp.slash import SlashCommands, is_compact, slash_commands

__all__ = [
    "GAP_PREFIX",
    "AcpAgent",
    "AcpSession",
    "ClientLink",
    "EnvironmentChooser",
    "keep_runtime_environment",
]

log = logging.getLogger("steerable_bridge.acp")


class AcpAgent(SessionLifecycle):
    """Answers ACP requests for one client connection."""

    def __init__(
        self,
        port: AgentPort,
        *,
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
        choose_environment: EnvironmentChooser = keep_runtime_environment,
        prompt_requests: dict[Any, str] | None = None,
        workspaces: AcpWorkspaces | None = None,
        permission_timeout_s: float = 300.0,
        session_features: Callable[[], tuple[bool, bool]] = lambda: (False, False),
    ) -> None:
        self.port = port
        self.session_features = session_features
        """(notices, compaction) the client's raw `initialize` advertised (the transport
        reads them: the SDK's models drop them)."""
        self.permission_timeout_s = permission_timeout_s
        """How long a `session/request_permission` may wait for the client's answer."""
        self.commands = slash_commands(port.info().modes)
        self.workspaces = workspaces
        self.link = ClientLink()
        self.sessions: dict[str, AcpSession] = {}
        self.choose_environment = choose_environment
        self._spawn = spawn
        self._prompt_requests = prompt_requests if prompt_requests is not None else {}
        self._slash = SlashCommands(self)
        self._extensions = Extensions(self, self._prompt_requests)

    def on_connect(self, conn: Any) -> None:
        self.link.conn = conn
        # The SDK's connection under `AgentSideConnection` sends a notification from a plain
        # dict; hot updates go straight there (`session.py`), when this SDK has it.
        self.link.notify = raw_notify(conn)

    # -- connection ---------------------------------------------------------------------------

    async def _default_info(self) -> ModelInfo | None:
        try:
            return await self.port.model_info(self.port.info().default_model)
        except RouteError:
            return None

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: acp.ClientCapabilities | None = None,
        client_info: acp.Implementation | None = None,
        **kwargs: Any,
    ) -> acp.InitializeResponse:
        if protocol_version != PROTOCOL_VERSION:
            log.info("client asked for protocol %s; answering with %s", protocol_version, 1)
        self.link.capabilities = client_capabilities
        self.link.client_info = client_info
        self.link.notices, self.link.compaction = self.session_features()
        steerable = kwargs.get("steerable")
        self.link.events = isinstance(steerable, dict) and steerable.get("events") is True
        return initialize_response(
            await self._default_info(),
            self.port.info().default_model,
            workspaces=self.workspaces is not None,
            client=client_capabilities,
            port=self.port.info(),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> acp.AuthenticateResponse:
        """`stored-credentials` (the agent method): re-read the credentials a terminal
        `steerable-bridge login` saved and succeed once the default model has the key it
        needs (at once for keyless models). `login` is the terminal method, which clients
        run instead of sending; sent anyway, it is answered the same way."""
        if method_id not in (CREDENTIALS_METHOD, LOGIN_METHOD):
            raise errors.invalid_params(
                f"there is no auth method {method_id!r}; use {CREDENTIALS_METHOD!r}"
                f" (or run `steerable-bridge login` in a terminal)",
                stable="unknown_auth_method",
            )
        await self.check_key(self.port.info().default_model)
        return acp.AuthenticateResponse()

    def state(self, session_id: str) -> AcpSession:
        state = self.sessions.get(session_id)
        if state is None:
            raise errors.session_not_found(session_id)
        return state

    async def conversation(self, state: AcpSession) -> Conversation:
        """The open session's conversation as it is now (its mode, model and folder)."""
        try:
            return await self.port.load(state.id)
        except StoreError as error:
            if error.code == "session_not_found":  # deleted by another process
                raise errors.session_not_found(state.id) from None
            raise

    # -- mode and model -----------------------------------------------------------------------

    async def set_session_mode(
        self, mode_id: str, session_id: str, **kwargs: Any
    ) -> acp.SetSessionModeResponse:
        await self.change_mode(self.state(session_id), mode_id)
        return acp.SetSessionModeResponse()

    async def change_mode(self, state: AcpSession, mode_id: str) -> None:
        try:
            changed = await self.port.set_mode(state.id, mode_id)
        except ValueError as error:
            raise errors.invalid_params(str(error), stable="unknown_mode") from None
        if changed is not None:
            await state.emit(changed)

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kwargs: Any
    ) -> acp.SetSessionConfigOptionResponse:
        state = self.state(session_id)
        if config_id != "model":
            raise errors.invalid_params(
                f"there is no config option {config_id!r}; the only option is 'model'",
                stable="unknown_config_option",
            )
        route = str(value)
        await self.change_model(state, route)
        return acp.SetSessionConfigOptionResponse(
            config_options=list(model_options(self.port.info().models, route))
        )

    async def change_model(self, state: AcpSession, route: str) -> None:
        try:
            changed = await self.port.set_model(state.id, route)
        except ValueError as error:
            raise errors.invalid_params(str(error), stable="unknown_model") from None
        if changed is not None:
            await state.emit(changed)

    # -- prompt -------------------------------------------------------------------------------

    def _reader(self, state: AcpSession) -> ReadText | None:
        caps = self.link.capabilities
        if caps is None or caps.fs is None or not caps.fs.read_text_file:
            return None

        async def read(path: str) -> str:
            response = await self.link.conn.read_text_file(session_id=state.id, path=path)
            text: str = response.content
            return text

        return read

    async def prompt(
        self, prompt: list[PromptBlock], session_id: str, **kwargs: Any
    ) -> acp.PromptResponse:
        state = self.state(session_id)
        if not prompt:
            raise errors.invalid_params(
                "the prompt is empty; send at least one content block", stable="empty_prompt"
            )
        hold = self.port.reserve(session_id) if state.token is None else None
        if hold is None:
            raise errors.session_busy(session_id)
        try:
            return await self._prompt(state, prompt, hold, kwargs)
        finally:
            hold.release()

    async def _prompt(
        self, state: AcpSession, prompt: list[PromptBlock], hold: Reservation, meta: dict[str, Any]
    ) -> acp.PromptResponse:
        compact = is_compact(prompt)
        if not compact:
            reply = await self._slash.handle(state, prompt)
            if reply is not None:
                return reply
        conversation = await self.conversation(state)
        info = await self.check_key(conversation.model)
        token = state.token = CancelToken()
        try:
            if compact:
                turn = TurnInput(compact=True, traceparent=_traceparent(meta))
            else:
                parts = await prompt_parts(
                    prompt,
                    cwd=conversation.cwd,
                    read_text=self._reader(state),
                    accepts_images=info.accepts_images,
                    route=conversation.model,
                    accepts_documents=info.accepts_documents,
                )
                turn = TurnInput(content=parts, traceparent=_traceparent(meta))
            outcome = await self.port.prompt(
                state.id, turn, state.emit, cancel=token, reservation=hold
            )
        except SessionBusy as busy:
            raise errors.session_busy(state.id, busy) from None
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None
        finally:
            if state.token is token:
                state.token = None
        if compact and outcome.stop_reason == "end_turn":
            await self._slash.after_compact(state, outcome)
        ending = _jsonable(outcome.final_event)
        if outcome.stop_reason is None:
            raise errors.run_failed(
                outcome.error_code or "run_failed",
                outcome.error_message or "the turn failed",
                outcome.run_id,
                ending,
                trace_id=outcome.trace_id,
            )
        usage = outcome.usage
        counted = not (outcome.stop_reason == "cancelled" and usage.total_tokens == 0)
        return acp.PromptResponse(
            stop_reason=stop_reason(outcome.stop_reason),
            usage=acp.Usage(  # a turn cancelled before its provider counted reports none
                total_tokens=usage.total_tokens,
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.completion_tokens,
                thought_tokens=usage.reasoning_tokens or None,
                cached_read_tokens=usage.cached_tokens or None,
                cached_write_tokens=usage.cache_creation_tokens or None,
            )
            if counted
            else None,
            field_meta={
                "steerable": {
                    "run_id": outcome.run_id,
                    "stop_reason": outcome.stop_reason,
                    **({"event": ending} if ending is not None else {}),
                    **({"trace_id": outcome.trace_id} if outcome.trace_id else {}),
                }
            },
        )

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self.sessions.get(session_id)
        if state is None:
            log.info("session/cancel for unknown session %s ignored", session_id)
            return
        if state.token is not None:
            state.token.cancel("cancelled by the client (session/cancel)")
        else:  # a turn another process runs in the session, if any
            await self.port.cancel(session_id, "cancelled by the client (session/cancel)")

    # -- extensions (see extensions.py) ------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._extensions.method(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self._extensions.notification(method, params)


def _jsonable(event: LoopEvent | None) -> dict[str, Any] | None:
    """The run's closing LoopEvent as JSON, so a decoder rebuilds it exactly (seq, ts, usage)."""
    if event is None:
        return None
    from steerable_bridge.runtime.encoding import codec  # first use, not at start

    return codec.event_to_jsonable(event)


def _traceparent(meta: dict[str, Any]) -> str | None:
    """The caller's W3C trace context from the prompt's `_meta.traceparent`, if a string."""
    value = meta.get("traceparent")
    return value if isinstance(value, str) and value else None
