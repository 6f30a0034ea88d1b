"""The ACP side of one connection and of each open session: `ClientLink` and `AcpSession`.

`ClientLink` holds what the client said in `initialize` (capabilities, info, whether it
wants every LoopEvent as `_steerable/event`) and the SDK's `AgentSideConnection`, through
which the agent reaches the client (`session_update`, `request_permission`,
`read_text_file`, `create_terminal`, ...). `AcpSession` is the ACP side of one conversation
the agent port (`runtime/ports/port.py`) holds: its id, its renderer and the running prompt's
cancel token; `emit` is the turn's event sink: the raw event first (opt-in), then the
rendered updates, all awaited, so they precede the prompt's response. It remembers what the
events it passed on said that the transport needs later: the `permission_requested` event
of each call waiting for the client (the request's `_meta`; the loop sends it to the sink
before it asks), and the run that last compacted (`/compact`'s reply). A
`question_completed` event is sent as `elicitation/complete` for its question id.
`EnvironmentChooser` is the hook where a session's workspace environment is picked from the
link (the client's fs / terminal when offered); `keep_runtime_environment` is the default.
A lost connection, or a client that stops reading for `SEND_TIMEOUT_S`, cancels the running
turn instead of failing it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.transports.acp.questions import elicitation_id
from steerable_bridge.transports.acp.renderer import AcpRenderer, SdkUpdate, Update
from steerable_bridge.transports.acp.sdk_private import raw_connection
from steerable_bridge.transports.acp.wire import chunk_params

__all__ = ["AcpSession", "ClientLink", "EnvironmentChooser", "keep_runtime_environment"]

log = logging.getLogger("steerable_bridge.acp")

SEND_TIMEOUT_S = 30.0
"""How long one notification may wait for the client to read stdout before it counts as gone."""


@dataclass(slots=True)
class ClientLink:
    """One client connection: how to reach it and what it said it can do."""

    conn: Any = None
    """The SDK's `AgentSideConnection` (session_update, request_permission, fs, terminal)."""
    capabilities: acp.ClientCapabilities | None = None
    client_info: acp.Implementation | None = None
    events: bool = False
    """The client asked for every LoopEvent as `_steerable/event` notifications."""
    notices: bool = False
    """The client advertised `session.notices` (v1.25): notices go out as `notice` updates."""
    compaction: bool = False
    """The client advertised `session.compaction` (v1.25): compactions as their own updates."""
    alive: bool = True
    notify: Callable[[str, Any], Awaitable[None]] | None = None
    """The SDK connection's own `send_notification(method, params)`, for the updates built
    without models (`wire.py`); None sends everything through `conn.session_update`."""


EnvironmentChooser = Callable[[ClientLink, str], Environment | None]
"""(the client link, the conversation id) → the conversation's environment (None: the agent's)."""


def keep_runtime_environment(link: ClientLink, conversation_id: str) -> Environment | None:
    """The default hook: no client-side environment (tools use the runtime's own)."""
    return None


@dataclass(slots=True)
class AcpSession:
    """The ACP side of one open session."""

    id: str
    """The conversation's id (the ACP session id)."""
    link: ClientLink
    renderer: AcpRenderer
    token: CancelToken | None = None
    """The cancel token of the prompt being prepared or run (None when idle)."""
    announced: dict[str, ev.PermissionRequested] = field(default_factory=dict)
    """Call id → the `permission_requested` event sent for it, until the asker takes it."""
    asked: dict[str, ev.QuestionAsked] = field(default_factory=dict)
    """Question id → the `question_asked` event sent for it, until the questioner takes it."""
    compacted_in: str | None = None
    """The run id of the last `compaction` event sent."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for other parts of the transport (client environment, MCP) to keep state."""

    def observe(self, event: ev.LoopEvent) -> None:
        """Remember what the transport needs later from an event on its way to the client."""
        if isinstance(event, ev.PermissionRequested):
            self.announced[event.call_id] = event
        elif isinstance(event, ev.QuestionAsked):
            self.asked[event.question_id] = event
        elif isinstance(event, ev.Compaction):
            self.compacted_in = event.run_id
        elif isinstance(event, ev.RunFinished | ev.RunFailed):
            self.announced.clear()  # the turn is over: nothing of it waits for the asker
            self.asked.clear()

    def take_announced(self, call_id: str) -> ev.LoopEvent | None:
        """The `permission_requested` event the loop just sent for `call_id` (for `_meta`)."""
        return self.announced.pop(call_id, None)

    def take_asked(self, question_id: str) -> ev.LoopEvent | None:
        """The `question_asked` event the loop just sent for `question_id` (for `_meta`)."""
        return self.asked.pop(question_id, None)

    async def send(self, update: Update) -> None:
        if not self.link.alive:
            return
        try:  # bounded by `BatchingSender`: a client that stops reading raises TimeoutError
            if isinstance(update, SdkUpdate):
                await self.link.conn.session_update(session_id=self.id, update=update)
            else:
                await self._send_v125(update)
        except (ConnectionError, TimeoutError):
            self._lost()

    async def _send_v125(self, update: Any) -> None:
        """A v1.25 update the SDK's `session_update` cannot type (`schema/stable.py`), sent as
        the same `session/update` notification through the SDK's connection."""
        from acp.utils import notify_model

        from steerable_bridge.transports.acp.schema import stable

        notification = stable.SessionNotification(
            session_id=stable.SessionId(self.id), update=stable.SessionUpdate(update)
        )
        await notify_model(raw_connection(self.link.conn), "session/update", notification)

    async def emit(self, event: ev.LoopEvent, renderer: AcpRenderer | None = None) -> None:
        """Send one LoopEvent: the opt-in raw event first, then its rendered updates (text
        and thought chunks built without models when the connection allows, `wire.py`)."""
        kind = type(event)
        link = self.link
        if (kind is ev.TextDelta or kind is ev.ReasoningDelta) and link.notify is not None:
            # the hot path (one per streamed token): nothing to `observe`, no coroutine for
            # an opted-out raw channel, the params built without models
            if link.events:
                await self.send_event(event)
            if link.alive:
                params = chunk_params(self.id, event)  # type: ignore[arg-type]
                try:  # bounded by `BatchingSender`, as `send` is
                    await link.notify("session/update", params)
                except (ConnectionError, TimeoutError):
                    self._lost()
            return
        self.observe(event)
        await self.send_event(event)
        if kind is ev.QuestionCompleted:
            await self._complete(event)  # type: ignore[arg-type]
            return
        for update in (renderer or self.renderer).render(event):
            await self.send(update)

    async def _complete(self, event: ev.QuestionCompleted) -> None:
        """`elicitation/complete` for a url question that is over (the event in `_meta`)."""
        if not self.link.alive:
            return
        from steerable_bridge.runtime.encoding import codec

        try:
            with anyio.fail_after(SEND_TIMEOUT_S):
                await self.link.conn.complete_elicitation(
                    elicitation_id=elicitation_id(self.id, event.question_id),
                    steerable={"event": codec.event_to_jsonable(event)},
                )
        except (ConnectionError, TimeoutError):
            self._lost()

    async def send_event(self, event: ev.LoopEvent) -> None:
        """The raw event as `_steerable/event`, when the client opted in to every LoopEvent."""
        if self.link.events and self.link.alive:
            from steerable_bridge.runtime.encoding import (
                codec,  # only clients that opted in need it
            )

            try:
                with anyio.fail_after(SEND_TIMEOUT_S):
                    await self.link.conn.ext_notification(
                        "steerable/event", codec.event_to_jsonable(event)
                    )
            except (ConnectionError, TimeoutError):
                self._lost()

    def _lost(self) -> None:
        if self.link.alive:
            log.warning(
                "the client connection is gone (or stopped reading for %gs); cancelling running"
                " work",
                SEND_TIMEOUT_S,
            )
        self.link.alive = False
        if self.token is not None:
            self.token.cancel("the client disconnected")
