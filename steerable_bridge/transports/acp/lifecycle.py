"""The ACP session lifecycle: open, load, resume, fork, list, close and delete sessions.

`SessionLifecycle` is the part of `AcpAgent` (`agent.py`) that answers `session/new`,
`session/load`, `session/resume`, `session/fork`, `session/list`, `session/close` and the
delete extension, each through the agent port (`runtime/ports/port.py`). Opening a conversation
(new, load, resume, fork) hands the port an `attach` that the port calls once it knows the
conversation's id: it makes the conversation's `AcpSession` (`session.py`) with its own
`AcpRenderer`, an `AcpPermissionAsker` that asks the client (which the agent uses when its
approval is `ask`), the workspace environment `choose_environment` picks from the client's
capabilities, and mounts the client's MCP servers and workspace tools (`client_env.py`),
whose failures are told to the user once the session is open. A load replays the
conversation to the client through a replaying renderer: every visible event, each
message's streamed deltas coalesced into one chunk (`AgentPort.replay_after`,
`runtime/session_log/replay.py`); a client that opted in to every LoopEvent
(`_steerable/event`) also gets each event exactly as logged (`AgentPort.events_after`).
Prompts, modes and models stay in `agent.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from acp import schema as acp
from acp import update_agent_message_text

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.runtime.ports.port import AgentPort, Attach, Attachments, Conversation
from steerable_bridge.runtime.ports.storage import SessionBusy, StoreError
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.session_log.replay import Coalesced, coalesce_deltas
from steerable_bridge.runtime.values import Command
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.client_env import AcpWorkspaces
from steerable_bridge.transports.acp.permissions import AcpPermissionAsker
from steerable_bridge.transports.acp.questions import AcpQuestioner, question_modes
from steerable_bridge.transports.acp.renderer import (
    AcpRenderer,
    iso_time,
    mode_state,
    model_options,
)
from steerable_bridge.transports.acp.session import AcpSession, ClientLink, EnvironmentChooser

__all__ = ["SessionLifecycle"]

log = logging.getLogger("steerable_bridge.acp")

Opening = Callable[[Attach], Awaitable[Conversation]]
"""One of the port's open / load / fork calls, waiting for its `attach`."""


class SessionLifecycle:
    """How `AcpAgent` opens, replays, forks, lists and closes sessions (set by its init)."""

    port: AgentPort
    link: ClientLink
    sessions: dict[str, AcpSession]
    workspaces: AcpWorkspaces | None
    choose_environment: EnvironmentChooser
    permission_timeout_s: float
    commands: tuple[Command, ...]
    _spawn: Callable[[Callable[[], Awaitable[None]]], None]

    async def check_key(self, route: str) -> ModelInfo:
        """What `route` takes; AUTH_REQUIRED unless it has the key it needs (the port
        re-reads the stored credentials first: a login may have saved one since)."""
        try:
            info = await self.port.model_info(route)
        except RouteError as error:
            raise errors.route_failed(error.code, error.message) from None
        if info.needs_api_key_env:
            raise errors.auth_required(info.needs_api_key_env, route)
        return info

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

    def _modes(self, conversation: Conversation) -> acp.SessionModeState:
        return mode_state(conversation.mode, self.port.info().modes)

    def _options(self, route: str) -> list[acp.SessionConfigOptionSelect]:
        return list(model_options(self.port.info().models, route))

    async def _open(
        self,
        opening: Opening,
        cwd: str,
        mcp_servers: list[Any] | None,
        kwargs: dict[str, Any],
        *,
        source: str | None = None,
    ) -> tuple[AcpSession, Conversation, str | None]:
        """Run `opening` with this connection's `attach`; the conversation's `AcpSession`
        (now open), the conversation, and a warning for the user about MCP servers that
        failed. `source` is the id load / resume / fork name (for their errors)."""
        made: list[tuple[AcpSession, str | None]] = []

        async def attach(conversation_id: str) -> Attachments:
            state = AcpSession(
                id=conversation_id,
                link=self.link,
                renderer=AcpRenderer(
                    routes=self.port.info().models,
                    notices=self.link.notices,
                    compaction=self.link.compaction,
                ),
            )
            asker = AcpPermissionAsker(
                self.link.conn,
                conversation_id,
                timeout_s=self.permission_timeout_s,
                announced=state.take_announced,
            )
            modes = question_modes(self.link.capabilities)
            asks = bool(modes)
            questioner = (
                AcpQuestioner(
                    self.link.conn,
                    conversation_id,
                    timeout_s=self.permission_timeout_s,
                    announced=state.take_asked,
                )
                if asks
                else None
            )
            environment: Environment | None = self.choose_environment(self.link, conversation_id)
            tools: tuple[Tool, ...] = ()
            warning = None
            if self.workspaces is not None:
                mount = await self.workspaces.mount(
                    conversation_id,
                    cwd,
                    self.link,
                    spawn=self._spawn,
                    mcp_servers=mcp_servers,
                    additional_directories=kwargs.get("additional_directories"),
                )
                environment, tools, warning = mount.environment, mount.tools, mount.warning
            elif mcp_servers:
                log.info("ignoring %d MCP servers: no workspace is configured", len(mcp_servers))
            made.append((state, warning))
            return Attachments(
                asker=asker,
                questioner=questioner,
                questions=asks,
                question_modes=modes,
                environment=environment,
                tools=tools,
            )

        try:
            conversation = await opening(attach)
        except BaseException as error:
            for state, _ in made:  # attached, then refused: stop what was mounted
                await self._unmount(state.id)
            if source is not None and isinstance(error, SessionBusy):
                raise errors.session_busy(source) from None
            if source is not None and isinstance(error, StoreError):
                if error.code == "session_not_found":
                    raise errors.session_not_found(source) from None
                raise errors.invalid_params(error.message, stable=error.code) from None
            raise
        if not made:
            raise RuntimeError("the agent port opened a conversation without attaching it")
        state, warning = made[-1]
        self.sessions[state.id] = state
        return state, conversation, warning

    def _tell(self, state: AcpSession, warning: str | None) -> None:
        """Show `warning` (failed MCP servers) in the session, after the response: a `notice`
        to a client that advertised `session.notices`, else an agent message."""
        if warning is None:
            return

        async def tell() -> None:
            if not self.link.notices:
                await state.send(update_agent_message_text(warning))
                return
            from steerable_bridge.transports.acp.schema import stable

            # not a LoopEvent (no `_meta.steerable`): opening a session runs no turn to log it in
            await state.send(
                stable.SessionUpdate12(
                    session_update="notice",
                    severity=stable.NoticeSeverity("warning"),
                    title="An MCP server failed to start",
                    description=warning,
                )
            )

        self._spawn(tell)

    def _after_response(self, state: AcpSession, event: ev.LoopEvent) -> None:
        async def send() -> None:
            await state.emit(event)

        self._spawn(send)

    async def _announce_commands(self, conversation_id: str) -> ev.LoopEvent:
        """Log the slash commands the conversation offers (`available_commands_update`)."""
        return await self.port.record(
            conversation_id,
            ev.CommandsUpdated(session_id="", run_id="", seq=-1, ts=0, commands=self.commands),
        )

    def _require(self, method: str, can: bool) -> None:
        """Refuse what `initialize` did not advertise because the agent cannot do it."""
        if not can:
            raise errors.not_supported(
                method,
                f"{self.port.info().name} cannot do {method} (initialize did not offer it);"
                " open a new session instead",
            )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> acp.NewSessionResponse:
        cwd = self._check_cwd(cwd)
        await self.check_key(self.port.info().default_model)
        state, conversation, warning = await self._open(
            lambda attach: self.port.open(cwd, attach=attach), cwd, mcp_servers, kwargs
        )
        self._tell(state, warning)
        self._after_response(state, await self._announce_commands(state.id))
        return acp.NewSessionResponse(
            session_id=state.id,
            modes=self._modes(conversation),
            config_options=self._options(conversation.model),
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> acp.LoadSessionResponse:
        self._require("session/load", self.port.info().can_load)
        cwd = self._check_cwd(cwd)
        state, conversation, warning = await self._open(
            lambda attach: self.port.load(session_id, cwd=cwd, attach=attach),
            cwd,
            mcp_servers,
            kwargs,
            source=session_id,
        )
        replay = AcpRenderer(
            routes=self.port.info().models, echo_user=True, compaction=self.link.compaction
        )
        has_commands = False
        # Each message's streamed deltas as one chunk; a client that opted in to every
        # LoopEvent also gets each event exactly as logged, on the lossless channel.
        history: Sequence[ev.LoopEvent] = ()
        if state.link.events:
            history = await self.port.events_after(session_id)
            items: Sequence[Coalesced] = list(coalesce_deltas(history))
        else:
            items = await self.port.replay_after(session_id)
        sent = 0  # how many of `history` went out on the lossless channel
        for item in items:
            while sent < len(history) and history[sent].seq <= item.last_seq:
                await state.send_event(history[sent])  # opted in: every event, as logged
                sent += 1
            has_commands = has_commands or isinstance(item.event, ev.CommandsUpdated)
            for update in replay.render(item.event, last_seq=item.last_seq):
                await state.send(update)
        if not has_commands:
            await state.emit(await self._announce_commands(session_id))
        self._tell(state, warning)
        return acp.LoadSessionResponse(
            modes=self._modes(conversation), config_options=self._options(conversation.model)
        )

    async def resume_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> acp.ResumeSessionResponse:
        self._require("session/resume", self.port.info().can_load)
        cwd = self._check_cwd(cwd)
        state, conversation, warning = await self._open(
            lambda attach: self.port.load(session_id, cwd=cwd, attach=attach),
            cwd,
            kwargs.get("mcp_servers"),
            kwargs,
            source=session_id,
        )
        self._tell(state, warning)
        return acp.ResumeSessionResponse(
            modes=self._modes(conversation), config_options=self._options(conversation.model)
        )

    async def fork_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> acp.ForkSessionResponse:
        self._require("session/fork", self.port.info().can_fork)
        cwd = self._check_cwd(cwd)
        state, conversation, warning = await self._open(
            lambda attach: self.port.fork(session_id, cwd, attach=attach),
            cwd,
            kwargs.get("mcp_servers"),
            kwargs,
            source=session_id,
        )
        self._tell(state, warning)
        return acp.ForkSessionResponse(
            session_id=state.id,
            modes=self._modes(conversation),
            config_options=self._options(conversation.model),
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> acp.ListSessionsResponse:
        self._require("session/list", self.port.info().can_list)
        if cwd is not None and not os.path.isabs(cwd):
            raise errors.invalid_params(
                f"cwd {cwd!r} is not an absolute path", stable="cwd_not_absolute"
            )
        try:
            page = await self.port.list(cwd=_normalize(cwd) if cwd else None, cursor=cursor)
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
        await self.port.close(session_id)
        return acp.CloseSessionResponse()

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]:
        request = acp.DeleteSessionRequest.model_validate(params)
        state = self.sessions.pop(request.session_id, None)
        if state is not None and state.token is not None:
            state.token.cancel("the session was deleted")
        await self._unmount(request.session_id)
        if not await self.port.delete(request.session_id):
            raise errors.session_not_found(request.session_id)
        return acp.DeleteSessionResponse().model_dump(by_alias=True, exclude_none=True)

    async def _unmount(self, session_id: str) -> None:
        if self.workspaces is not None:
            await self.workspaces.unmount(session_id)


def _normalize(path: str) -> str:
    """`path` without `..`, `.` or trailing separators (pure string work, no I/O)."""
    return os.path.normpath(path)
