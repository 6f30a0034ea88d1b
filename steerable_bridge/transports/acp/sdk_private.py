"""Every use of the ACP SDK's private names, in one place (checked against `CHECKED_VERSION`).

The SDK (`agent-client-protocol`, package `acp`) has no public form of a few things the ACP
transports need, so they are reached here and nowhere else; `tests/transports/acp/
test_sdk_private.py` fails naming the SDK version and the name when one of them moves. Why
each exists: `acp._transport` holds the message-level `Transport` protocol and the in-memory
`memory_transport_pair` the remote transport binds each connection to (the SDK's own HTTP
server imports them from there too); `acp._sse` writes the SSE events that server streams;
`acp.stdio._windows_stdio_streams` is the SDK's thread-fed stdin / stdout, the only streams
that work when stdio is a file or /dev/null (epoll refuses those); the connection objects
keep their JSON-RPC `Connection` in `_conn`, which we need for raw frames the SDK's models
cannot hold (v1.25 capabilities and updates) and whose `_handler` we wrap so a bad
notification costs a log line, not a traceback; and the HTTP core's `ConnectionState`,
`ConnectionRegistry` and `AcpServer` keep their state in private fields, which
`PumpedConnectionState`, `OpenRegistry` and `use_registry` set and read for the remote
transport's subclasses (their `__init__` must build the SDK connection differently, and the
registry caps connections). Nothing else in `steerable_bridge` may touch an SDK private name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from acp._sse import serialize_sse_event, serialize_sse_keepalive
from acp._transport import Transport, memory_transport_pair
from acp.agent.connection import AgentSideConnection
from acp.client.connection import ClientSideConnection
from acp.connection import Connection, MethodHandler
from acp.http.server import AcpServer, ConnectionRegistry, ConnectionState, OutboundStream
from acp.stdio import _windows_stdio_streams

__all__ = [
    "CHECKED_VERSION",
    "PRIVATE_NAMES",
    "OpenRegistry",
    "PumpedConnectionState",
    "Transport",
    "memory_transport_pair",
    "raw_connection",
    "raw_notify",
    "serialize_sse_event",
    "serialize_sse_keepalive",
    "thread_stdio_streams",
    "use_registry",
    "wrap_handler",
]

CHECKED_VERSION = "0.12.1"
"""The `agent-client-protocol` release every name below was read against."""

PRIVATE_NAMES = (
    "acp._sse.serialize_sse_event",
    "acp._sse.serialize_sse_keepalive",
    "acp._transport.Transport",
    "acp._transport.memory_transport_pair",
    "acp.stdio._windows_stdio_streams",
    "acp.agent.connection.AgentSideConnection._conn",
    "acp.client.connection.ClientSideConnection._conn",
    "acp.connection.Connection._handler",
    "acp.http.server.ConnectionState._pump_side",
    "acp.http.server.ConnectionState._agent_conn",
    "acp.http.server.ConnectionState._multiplex",
    "acp.http.server.ConnectionState._pending_routes",
    "acp.http.server.ConnectionState._response_waiters",
    "acp.http.server.ConnectionState._pump_task",
    "acp.http.server.ConnectionState._route_outbound",
    "acp.http.server.ConnectionRegistry._connections",
    "acp.http.server.AcpServer._registry",
)
"""Each SDK private name this module uses (the test checks every one of them)."""


def raw_connection(conn: AgentSideConnection | ClientSideConnection) -> Connection:
    """The JSON-RPC `Connection` under an SDK connection, for frames its models cannot hold."""
    return conn._conn


def raw_notify(conn: Any) -> Callable[[str, Any], Awaitable[None]] | None:
    """`send_notification(method, params)` of the `Connection` under `conn`, or None when
    `conn` has none (a test double, say)."""
    inner = getattr(conn, "_conn", None)
    notify: Callable[[str, Any], Awaitable[None]] | None = getattr(inner, "send_notification", None)
    return notify


def wrap_handler(conn: AgentSideConnection, wrap: Callable[[MethodHandler], MethodHandler]) -> None:
    """Put `wrap` around the method handler the SDK built for `conn`."""
    conn._conn._handler = wrap(conn._conn._handler)


async def thread_stdio_streams(
    limit: int | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The SDK's thread-fed stdin / stdout streams (they write to `sys.stdout`)."""
    return await _windows_stdio_streams(asyncio.get_running_loop(), limit=limit)


class PumpedConnectionState(ConnectionState):
    """The SDK's `ConnectionState` over an `AgentSideConnection` its subclass built itself.

    The SDK's `__init__` builds the connection, so a subclass that must build it otherwise
    calls this one; the SDK's routing and pumping are reused. `route_outbound` is the hook
    the pump calls for every agent→client message (the SDK's own routing by default)."""

    def __init__(
        self,
        connection_id: str,
        *,
        pump_side: Transport,
        agent_conn: AgentSideConnection,
        multiplex: bool,
    ) -> None:
        self.connection_id = connection_id
        self._pump_side = pump_side
        self._agent_conn = agent_conn
        self.connection_stream = OutboundStream()
        self.session_streams: dict[str, OutboundStream] = {}
        self._multiplex = OutboundStream() if multiplex else None
        self._pending_routes: dict[str, str] = {}
        self._response_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._pump_task: asyncio.Task[None] | None = None

    @property
    def multiplex(self) -> OutboundStream | None:
        """The one stream every message goes to (a WebSocket), or None (SSE streams)."""
        return self._multiplex

    def take_waiter(self, key: str) -> asyncio.Future[dict[str, Any]] | None:
        """The future awaiting the response with id `key` (initialize's), now forgotten."""
        return self._response_waiters.pop(key, None)

    def take_route(self, key: str) -> str | None:
        """The session the request with id `key` was sent on, now forgotten."""
        return self._pending_routes.pop(key, None)

    async def _route_outbound(self, message: dict[str, Any]) -> None:
        await self.route_outbound(message)

    async def route_outbound(self, message: dict[str, Any]) -> None:
        """Send one agent→client message to its stream."""
        await super()._route_outbound(message)


class OpenRegistry(ConnectionRegistry):
    """The SDK's `ConnectionRegistry`, with its connections open to a subclass."""

    @property
    def connections(self) -> dict[str, ConnectionState]:
        """Connection id → state, the registry's own dict (a subclass adds to it)."""
        return self._connections


def use_registry(server: AcpServer, registry: ConnectionRegistry) -> None:
    """Make `server` keep its connections in `registry` (the SDK's makes its own)."""
    server._registry = registry
