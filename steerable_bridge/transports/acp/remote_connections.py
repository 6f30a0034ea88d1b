"""Remote ACP connections: each client's SDK connection state, bound to our agent; the registry.

`RemoteConnection` is the SDK's pumped connection state over an in-memory pipe whose agent
side is `GuardedMessages` (`route_message` on the way in — SDK gaps renamed, prompts tracked —
and answered requests forgotten on the way out), with a `LazyAcpAgent` on the shared agent
port. It routes each outbound message to the session's own SSE stream while someone listens
on it, else to the connection's stream, and owns the tasks and workspace mounts it started:
closing it cancels its running prompts, unmounts its workspaces (within `CLOSE_GRACE_S`) and
cancels its tasks. `RemoteRegistry` makes them, at most `limit` at once
(`TooManyConnections`); `RemoteServer` is the SDK's server core over that registry, letting
a session established on another connection be used on this one (`admit_session`, at most
`MAX_SESSION_STREAMS` per connection). `remote.py` serves them over HTTP and WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from acp.agent.connection import AgentSideConnection
from acp.http.protocol import (
    is_response_message,
    message_id_key,
    session_id_from_params,
    session_id_from_result,
)
from acp.http.server import AcpServer, ConnectionState

from steerable_bridge.transports.acp.capabilities import session_features
from steerable_bridge.transports.acp.front import LazyAcpAgent
from steerable_bridge.transports.acp.sdk_private import (
    OpenRegistry,
    PumpedConnectionState,
    Transport,
    memory_transport_pair,
    use_registry,
    wrap_handler,
)
from steerable_bridge.transports.acp.server import quiet_notifications, route_message

if TYPE_CHECKING:
    from steerable_bridge.transports.acp.client_env import AcpWorkspaces

__all__ = [
    "CLOSE_GRACE_S",
    "AgentMaker",
    "RemoteConnection",
    "RemoteRegistry",
    "RemoteServer",
    "TooManyConnections",
]

CLOSE_GRACE_S = 5.0
"""How long closing a connection may wait for its workspaces to unmount."""
MAX_SESSION_STREAMS = 256
"""Session streams one connection may hold."""


class GuardedMessages:
    """The agent side of a connection's in-memory pipe, with `route_message` on the way in
    and the bookkeeping of answered requests on the way out (as `GuardedTransport`)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.prompts: dict[Any, str] = {}
        self.unanswered: set[Any] = set()
        self.session_features = (False, False)
        """(notices, compaction) the connection's `initialize` advertised (the SDK's models
        drop these v1.25 capabilities, so they are read from the raw frame)."""

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message and ("result" in message or "error" in message):
            self.prompts.pop(message.get("id"), None)
            self.unanswered.discard(message.get("id"))
        await self.inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self.inner.receive()
        if message is None:
            return None
        if message.get("method") == "initialize":
            self.session_features = session_features(message.get("params"))
        return route_message(message, self.prompts, self.unanswered)

    async def close(self) -> None:
        await self.inner.close()


AgentMaker = Callable[["RemoteConnection"], Any]


class RemoteConnection(PumpedConnectionState):
    """One remote client: the SDK's connection state, bound to our agent (module docstring).

    The SDK builds its connection without the unstable methods and over an unguarded pipe,
    so this one builds its own (`PumpedConnectionState`); the SDK's pumping is reused."""

    def __init__(self, connection_id: str, make_agent: AgentMaker, *, multiplex: bool) -> None:
        server_side, pump_side = memory_transport_pair()
        self.messages = GuardedMessages(server_side)
        self.tasks: set[asyncio.Task[None]] = set()
        self.mounts: list[AcpWorkspaces] = []
        self.listeners: dict[str, int] = {}
        """Session id → SSE streams open on it now."""
        self.attached = asyncio.Event()
        self.front: LazyAcpAgent = make_agent(self)
        conn = AgentSideConnection(
            cast(Any, self.front), self.messages, listening=True, use_unstable_protocol=True
        )
        wrap_handler(conn, quiet_notifications)
        super().__init__(connection_id, pump_side=pump_side, agent_conn=conn, multiplex=multiplex)
        self._closing = False

    def spawn(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` as a task this connection owns (cancelled when it closes)."""

        async def run() -> None:
            await job()

        task = asyncio.ensure_future(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def route_outbound(self, message: dict[str, Any]) -> None:
        target: str | None
        if is_response_message(message):
            key = message_id_key(message.get("id"))
            waiter = self.take_waiter(key) if key is not None else None
            if waiter is not None:
                if not waiter.done():
                    waiter.set_result(message)
                return
            routed = self.take_route(key) if key is not None else None
            established = session_id_from_result(message.get("result"))
            if established is not None and len(self.session_streams) < MAX_SESSION_STREAMS:
                self.ensure_session_stream(established)
            target = None if established is not None else routed
        else:
            target = session_id_from_params(message.get("params"))
        if self.multiplex is not None:
            await self.multiplex.push(message)
            return
        if target is not None and self.listeners.get(target, 0) > 0:
            await self.ensure_session_stream(target).push(message)
            return
        await self.connection_stream.push(message)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        built = self.front.built
        if built is not None:
            for state in list(built.sessions.values()):
                if state.token is not None:
                    state.token.cancel("the client disconnected")
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_GRACE_S):
                for mount in self.mounts:
                    await mount.aclose()
        others = [task for task in self.tasks if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        for task in others:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await super().close()


class TooManyConnections(Exception):
    """The server holds `max_connections` already."""


class RemoteRegistry(OpenRegistry):
    """The SDK's registry, making `RemoteConnection`s, at most `limit` at once."""

    def __init__(self, make_agent: AgentMaker, limit: int) -> None:
        super().__init__()
        self.make_agent = make_agent
        self.limit = limit

    def create(self, agent_factory: Any) -> ConnectionState:
        return self._add(multiplex=False)

    def create_multiplex(self, agent_factory: Any) -> ConnectionState:
        return self._add(multiplex=True)

    def _add(self, *, multiplex: bool) -> RemoteConnection:
        if len(self.connections) >= self.limit:
            raise TooManyConnections
        state = RemoteConnection(uuid.uuid4().hex, self.make_agent, multiplex=multiplex)
        state.start()
        self.connections[state.connection_id] = state
        return state

    def remote(self, connection_id: str | None) -> RemoteConnection | None:
        state = self.connections.get(connection_id) if connection_id is not None else None
        return state if isinstance(state, RemoteConnection) else None


class RemoteServer(AcpServer):
    """The SDK's server core over `RemoteRegistry`, with sessions of other connections
    allowed on this one (the agent decides whether a session exists)."""

    def __init__(self, make_agent: AgentMaker, limit: int) -> None:
        super().__init__(cast(Any, make_agent))  # unused: the registry below makes agents
        self.remote = RemoteRegistry(make_agent, limit)
        use_registry(self, self.remote)

    def admit_session(self, connection_id: str | None, session_id: str | None) -> bool:
        """Let `session_id` be used on the connection; False past `MAX_SESSION_STREAMS`."""
        state = self.remote.remote(connection_id)
        if state is None or session_id is None or state.has_session(session_id):
            return True
        if len(state.session_streams) >= MAX_SESSION_STREAMS:
            return False
        state.ensure_session_stream(session_id)
        return True
