"""The ACP session lifecycle: open, load, resume, fork, list, close and delete sessions.

`SessionLifecycle` is the part of `AcpAgent` (`agent.py`) that answers `session/new`,
`session/load`, `session/resume`, `session/fork`, `session/list`, `session/close` and the
delete extension. Opening a session (`_open`) wraps the runtime's `Session` in an
`AcpSession` (`session.py`) with its own `AcpRenderer`, gives it its permission policy
(asking the client through `AcpPermissionAsker` when approval is `ask`) and the workspace
environment `choose_environment` picks from the client's capabilities, then mounts the
client's MCP servers and workspace tools (`client_env.py`). A load replays the log to the
client through a replaying renderer: the whole visible log (`runtime/replay.py`), each
message's streamed deltas coalesced into one chunk unless the client opted in to every
LoopEvent (`_steerable/event`), which replays exactly as logged. Prompts, modes and
models stay in `agent.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent import Agent
from steerable_bridge.runtime.model import ModelProvider
from steerable_bridge.runtime.permissions import ModePolicy, StaticPolicy
from steerable_bridge.runtime.projection import session_facts
from steerable_bridge.runtime.replay import coalesce_deltas, visible_log
from steerable_bridge.runtime.routing import RouteError
from steerable_bridge.runtime.session import Session
from steerable_bridge.runtime.storage import StoreError
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.client_env import AcpWorkspaces
from steerable_bridge.transports.acp.permissions import AcpPermissionAsker
from steerable_bridge.transports.acp.renderer import (
    AcpRenderer,
    iso_time,
    mode_state,
    model_options,
)
from steerable_bridge.transports.acp.session import AcpSession, ClientLink, EnvironmentChooser
from steerable_bridge.transports.acp.slash import COMMANDS

__all__ = ["SessionLifecycle"]

log = logging.getLogger("steerable_bridge.acp")


class SessionLifecycle:
    """How `AcpAgent` opens, replays, forks, lists and closes sessions (set by its init)."""

    agent: Agent
    link: ClientLink
    sessions: dict[str, AcpSession]
    workspaces: AcpWorkspaces | None
    choose_environment: EnvironmentChooser
    _spawn: Callable[[Callable[[], Awaitable[None]]], None]

    async def check_key(self, route: str) -> ModelProvider:
        """`route`'s provider; AUTH_REQUIRED unless it has the key it needs, re-reading the
        stored credentials first when it has not (a login may have saved one since)."""
        provider = self._resolve(route)
        if provider.info.needs_api_key_env:
            await self.agent.router.refresh()
            provider = self._resolve(route)
        if provider.info.needs_api_key_env:
            raise errors.auth_required(provider.info.needs_api_key_env, route)
        return provider

    def _resolve(self, route: str) -> ModelProvider:
        try:
            return self.agent.router.resolve(route)
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None

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

    def _after_response(self, state: AcpSession, event: ev.LoopEvent) -> None:
        async def send() -> None:
            await state.emit(event)

        self._spawn(send)

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> acp.NewSessionResponse:
        cwd = self._check_cwd(cwd)
        await self.check_key(self.agent.config.model)
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
        history = await visible_log(session)
        sent = 0  # how many of `history` went out on the lossless channel
        for item in coalesce_deltas(history):  # each message's streamed deltas as one chunk
            while sent < len(history) and history[sent].seq <= item.last_seq:
                await state.send_event(history[sent])  # opted in: every event, as logged
                sent += 1
            has_commands = has_commands or isinstance(item.event, ev.CommandsUpdated)
            for update in replay.render(item.event, last_seq=item.last_seq):
                await state.send(update)
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
        for event in await visible_log(source):  # the whole log, not only the loaded tail
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


def _announced(session: Session, call_id: str) -> ev.LoopEvent | None:
    """The `permission_requested` event the loop just logged for `call_id` (for `_meta`)."""
    view = session.log.view()
    for index in range(len(view) - 1, max(len(view) - 16, -1), -1):
        event = view[index]
        if isinstance(event, ev.PermissionRequested) and event.call_id == call_id:
            return event
    return None


def _normalize(path: str) -> str:
    """`path` without `..`, `.` or trailing separators (pure string work, no I/O)."""
    return os.path.normpath(path)
