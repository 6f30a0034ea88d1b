"""The ACP agent: every ACP method, wired to the runtime's `Agent` and `Session`.

`AcpAgent` is a plain class the SDK's `AgentSideConnection` routes to (it deliberately does
not subclass `acp.Agent`, a Protocol whose defaults would answer unknown methods with empty
results). It holds one `ClientLink` and, per open session, an `AcpSession` (see
`session.py`); LoopEvents go out through `AcpSession.emit` inside the request, so nothing is
sent after a prompt's response. `choose_environment` (called whenever a session is opened:
new, load, resume, fork) is the hook where a session's workspace environment is picked
from the client's capabilities; the default leaves the runtime's own.
Slash commands (/help, /mode, /model) are answered here without a model turn. Methods the
SDK has no route for reach `ext_method` / `ext_notification` under `GAP_PREFIX` (see
`server.py`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from acp import PROTOCOL_VERSION
from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent import Agent
from steerable_bridge.runtime.cancel import CancelToken
from steerable_bridge.runtime.model import ModelInfo
from steerable_bridge.runtime.permissions import MODES, ModePolicy, StaticPolicy
from steerable_bridge.runtime.projection import session_facts
from steerable_bridge.runtime.routing import RouteError
from steerable_bridge.runtime.session import Session, SessionBusy
from steerable_bridge.runtime.storage import StoreError
from steerable_bridge.runtime.turn import TurnInput
from steerable_bridge.runtime.values import Command
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.capabilities import initialize_response
from steerable_bridge.transports.acp.client_env import AcpWorkspaces
from steerable_bridge.transports.acp.content import PromptBlock, ReadText, prompt_parts
from steerable_bridge.transports.acp.extensions import GAP_PREFIX, Extensions
from steerable_bridge.transports.acp.permissions import AcpPermissionAsker
from steerable_bridge.transports.acp.renderer import (
    AcpRenderer,
    iso_time,
    mode_state,
    model_options,
    stop_reason,
)
from steerable_bridge.transports.acp.session import (
    AcpSession,
    ClientLink,
    EnvironmentChooser,
    keep_runtime_environment,
)
from steerable_bridge.transports.acp.slash import SlashCommands, is_compact

__all__ = [
    "COMMANDS",
    "GAP_PREFIX",
    "AcpAgent",
    "AcpSession",
    "ClientLink",
    "EnvironmentChooser",
    "keep_runtime_environment",
]

log = logging.getLogger("steerable_bridge.acp")

COMMANDS: tuple[Command, ...] = (
    Command(name="help", description="Show the commands, modes and models this agent offers"),
    Command(
        name="mode",
        description="Switch the permission mode: " + ", ".join(MODES),
        input_hint="mode id",
    ),
    Command(name="model", description="Switch the model route", input_hint="provider:model"),
    Command(
        name="compact",
        description="Summarize the conversation so far to free the model's context",
    ),
)


class AcpAgent:
    """Answers ACP requests for one client connection."""

    def __init__(
        self,
        agent: Agent,
        *,
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
        choose_environment: EnvironmentChooser = keep_runtime_environment,
        prompt_requests: dict[Any, str] | None = None,
        workspaces: AcpWorkspaces | None = None,
    ) -> None:
        self.agent = agent
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

    # -- connection ---------------------------------------------------------------------------

    def _default_info(self) -> ModelInfo | None:
        try:
            return self.agent.router.resolve(self.agent.config.model).info
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
        steerable = kwargs.get("steerable")
        self.link.events = isinstance(steerable, dict) and steerable.get("events") is True
        return initialize_response(
            self._default_info(), self.agent.config.model, workspaces=self.workspaces is not None
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> acp.AuthenticateResponse:
        info = self._default_info()
        missing = info.needs_api_key_env if info is not None else None
        if missing:
            raise errors.auth_required(missing, self.agent.config.model)
        return acp.AuthenticateResponse()

    # -- sessions -----------------------------------------------------------------------------

    def _check_cwd(self, cwd: str) -> str:
        if not os.path.isabs(cwd):
            raise errors.invalid_params(
                f"cwd {cwd!r} is not an absolute path; send the workspace's absolute path",
                stable="cwd_not_absolute",
            )
        if not os.path.isdir(cwd):
            raise errors.invalid_params(
                f"cwd {cwd} does not exist or is not a directory; open an existing folder",
                stable="cwd_not_found",
            )
        return _normalize(cwd)

    def _check_auth(self, route: str) -> None:
        try:
            info = self.agent.router.resolve(route).info
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None
        if info.needs_api_key_env:
            raise errors.auth_required(info.needs_api_key_env, route)

    def _open(self, session: Session) -> AcpSession:
        state = AcpSession(
            session=session,
            link=self.link,
            renderer=AcpRenderer(routes=self.agent.router.routes),
        )
        approval = self.agent.config.approval
        if approval == "ask":
            asker = AcpPermissionAsker(
                self.link.conn,
                session.id,
                timeout_s=self.agent.config.loop.permission_timeout_s,
                announced=lambda call_id: _announced(session, call_id),
            )
            session.policy = ModePolicy(lambda: session.mode, asker)
        else:
            session.policy = StaticPolicy(approval)
        environment = self.choose_environment(self.link, session)
        if environment is not None:
            session.environment = environment
        self.sessions[session.id] = state
        return state

    async def _load(self, session_id: str) -> Session:
        try:
            return await self.agent.load_session(session_id)
        except StoreError as error:
            if error.code == "session_not_found":
                raise errors.session_not_found(session_id) from None
            raise errors.invalid_params(error.message, stable=error.code) from None

    async def _loaded(self, session_id: str, cwd: str) -> Session:
        session = await self._load(session_id)
        if session.running:
            raise errors.session_busy(session_id)
        session.cwd = cwd
        return session

    def state(self, session_id: str) -> AcpSession:
        state = self.sessions.get(session_id)
        if state is None:
            raise errors.session_not_found(session_id)
        return state

    def _after_response(self, state: AcpSession, event: ev.LoopEvent) -> None:
        async def send() -> None:
            await state.emit(event)

        self._spawn(send)

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> acp.NewSessionResponse:
        cwd = self._check_cwd(cwd)
        self._check_auth(self.agent.config.model)
        state = self._open(await self.agent.new_session(cwd))
        await self._mount(state, mcp_servers, kwargs)
        event = await state.session.record(ev.CommandsUpdated, commands=COMMANDS)
        self._after_response(state, event)
        return acp.NewSessionResponse(
            session_id=state.id,
            modes=mode_state(state.session.mode),
            config_options=list(model_options(self.agent.router.routes, state.session.model)),
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> acp.LoadSessionResponse:
        cwd = self._check_cwd(cwd)
        session = await self._loaded(session_id, cwd)
        state = self._open(session)
        replay = AcpRenderer(routes=self.agent.router.routes, echo_user=True)
        has_commands = False
        for event in session.log.view():
            has_commands = has_commands or isinstance(event, ev.CommandsUpdated)
            await state.emit(event, replay)
        if not has_commands:
            await state.emit(await session.record(ev.CommandsUpdated, commands=COMMANDS))
        await self._mount(state, mcp_servers, kwargs)
        return acp.LoadSessionResponse(
            modes=mode_state(session.mode),
            config_options=list(model_options(self.agent.router.routes, session.model)),
        )

    async def resume_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> acp.ResumeSessionResponse:
        session = await self._loaded(session_id, self._check_cwd(cwd))
        await self._mount(self._open(session), kwargs.get("mcp_servers"), kwargs)
        return acp.ResumeSessionResponse(
            modes=mode_state(session.mode),
            config_options=list(model_options(self.agent.router.routes, session.model)),
        )

    async def fork_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> acp.ForkSessionResponse:
        cwd = self._check_cwd(cwd)
        source = await self._load(session_id)
        if source.running:
            raise errors.session_busy(session_id)
        fork = await self.agent.new_session(cwd, model=source.model)
        for event in source.log.view():
            fork.log.append(replace(event, session_id=fork.id))
        await fork.log.commit()
        fork.facts = session_facts(fork.log.view())
        await self._mount(self._open(fork), kwargs.get("mcp_servers"), kwargs)
        return acp.ForkSessionResponse(
            session_id=fork.id,
            modes=mode_state(fork.mode),
            config_options=list(model_options(self.agent.router.routes, fork.model)),
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> acp.ListSessionsResponse:
        if cwd is not None and not os.path.isabs(cwd):
            raise errors.invalid_params(
                f"cwd {cwd!r} is not an absolute path", stable="cwd_not_absolute"
            )
        try:
            page = await self.agent.list_sessions(
                cwd=_normalize(cwd) if cwd else None, cursor=cursor
            )
        except StoreError as error:
            raise errors.invalid_params(error.message, stable=error.code) from None
        return acp.ListSessionsResponse(
            sessions=[
                acp.SessionInfo(
                    session_id=r.session_id,
                    cwd=r.cwd,
                    title=r.title,
                    updated_at=iso_time(r.updated_at),
                )
                for r in page.records
            ],
            next_cursor=page.next_cursor,
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> acp.CloseSessionResponse:
        state = self.sessions.pop(session_id, None)
        if state is None:
            raise errors.session_not_found(session_id)
        if state.token is not None:
            state.token.cancel("the session was closed")
        await self._unmount(session_id)
        await self.agent.close_session(session_id)
        return acp.CloseSessionResponse()

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]:
        request = acp.DeleteSessionRequest.model_validate(params)
        state = self.sessions.pop(request.session_id, None)
        if state is not None and state.token is not None:
            state.token.cancel("the session was deleted")
        await self._unmount(request.session_id)
        if not await self.agent.delete_session(request.session_id):
            raise errors.session_not_found(request.session_id)
        return acp.DeleteSessionResponse().model_dump(by_alias=True, exclude_none=True)

    # -- workspace: environment, workspace tools, MCP servers (see client_env.py) -------------

    async def _mount(
        self, state: AcpSession, mcp_servers: list[Any] | None, kwargs: dict[str, Any]
    ) -> None:
        if self.workspaces is None:
            if mcp_servers:
                log.info("ignoring %d MCP servers: no workspace is configured", len(mcp_servers))
            return
        await self.workspaces.mount(
            state,
            spawn=self._spawn,
            mcp_servers=mcp_servers,
            additional_directories=kwargs.get("additional_directories"),
        )

    async def _unmount(self, session_id: str) -> None:
        if self.workspaces is not None:
            await self.workspaces.unmount(session_id)

    # -- mode and model -----------------------------------------------------------------------

    async def set_session_mode(
        self, mode_id: str, session_id: str, **kwargs: Any
    ) -> acp.SetSessionModeResponse:
        await self.change_mode(self.state(session_id), mode_id)
        return acp.SetSessionModeResponse()

    async def change_mode(self, state: AcpSession, mode_id: str) -> None:
        if mode_id not in MODES:
            raise errors.invalid_params(
                f"there is no mode {mode_id!r}; modes: {', '.join(MODES)}", stable="unknown_mode"
            )
        if mode_id != state.session.mode:
            await state.emit(await state.session.record(ev.ModeChanged, mode_id=mode_id))

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kwargs: Any
    ) -> acp.SetSessionConfigOptionResponse:
        state = self.state(session_id)
        if config_id != "model":
            raise errors.invalid_params(
                f"there is no config option {config_id!r}; the only option is 'model'",
                stable="unknown_config_option",
            )
        await self.change_model(state, str(value))
        return acp.SetSessionConfigOptionResponse(
            config_options=list(model_options(self.agent.router.routes, state.session.model))
        )

    async def change_model(self, state: AcpSession, route: str) -> None:
        routes = self.agent.router.routes
        if route not in routes:
            raise errors.invalid_params(
                f"there is no model {route!r}; models: {', '.join(routes)}", stable="unknown_model"
            )
        if route != state.session.model:
            await state.emit(
                await state.session.record(ev.ConfigChanged, option_id="model", value=route)
            )

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
        session = state.session
        if not prompt:
            raise errors.invalid_params(
                "the prompt is empty; send at least one content block", stable="empty_prompt"
            )
        if state.token is not None or session.running:
            raise errors.session_busy(session_id)
        compact = is_compact(prompt)
        if not compact:
            reply = await self._slash.handle(state, prompt)
            if reply is not None:
                return reply
        try:
            provider = self.agent.router.resolve(session.model)
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None
        if provider.info.needs_api_key_env:
            raise errors.auth_required(provider.info.needs_api_key_env, session.model)
        token = state.token = CancelToken()
        try:
            if compact:
                turn = TurnInput(compact=True, traceparent=_traceparent(kwargs))
            else:
                parts = await prompt_parts(
                    prompt,
                    cwd=session.cwd,
                    read_text=self._reader(state),
                    accepts_images=provider.info.accepts_images,
                    route=session.model,
                    accepts_documents=provider.info.accepts_documents,
                )
                turn = TurnInput(content=parts, traceparent=_traceparent(kwargs))
            outcome = await session.prompt(turn, state.emit, cancel=token, provider=provider)
        except SessionBusy as busy:
            raise errors.session_busy(session_id, busy) from None
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None
        finally:
            if state.token is token:
                state.token = None
        if compact and outcome.stop_reason == "end_turn":
            await self._slash.after_compact(state, outcome.run_id)
        ending = _run_end(session, outcome.run_id)
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
        elif await self.agent.owner_elsewhere(session_id) is not None:  # another process
            await self.agent.cancel(session_id, "cancelled by the client (session/cancel)")

    # -- extensions (see extensions.py) ------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._extensions.method(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self._extensions.notification(method, params)


def _announced(session: Session, call_id: str) -> ev.LoopEvent | None:
    """The `permission_requested` event the loop just logged for `call_id` (for `_meta`)."""
    view = session.log.view()
    for index in range(len(view) - 1, max(len(view) - 16, -1), -1):
        event = view[index]
        if isinstance(event, ev.PermissionRequested) and event.call_id == call_id:
            return event
    return None


def _run_end(session: Session, run_id: str) -> dict[str, Any] | None:
    """The run's closing LoopEvent as JSON, so a decoder rebuilds it exactly (seq, ts, usage)."""
    view = session.log.view()
    last = view[-1] if len(view) else None
    if last is not None and last.run_id == run_id and last.kind in ("run_finished", "run_failed"):
        from steerable_bridge.runtime import codec  # first use, not at start

        return codec.event_to_jsonable(last)
    return None


def _normalize(path: str) -> str:
    """`path` without `..`, `.` or trailing separators (pure string work, no I/O)."""
    return os.path.normpath(path)


def _traceparent(meta: dict[str, Any]) -> str | None:
    """The caller's W3C trace context from the prompt's `_meta.traceparent`, if a string."""
    value = meta.get("traceparent")
    return value if isinstance(value, str) and value else None
