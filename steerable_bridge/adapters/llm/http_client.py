"""One pooled `httpx.AsyncClient` per provider: the pattern every HTTP model adapter follows.

A provider builds a `PooledClient` in its constructor (cheap: nothing is opened), calls
`await pooled.client()` in each `stream()` and closes it in its own `aclose()`. The first
call builds the `httpx.AsyncClient` — TLS context, connection pool with keep-alive, HTTP/2
when the `h2` package is importable (`pip install 'steerable-bridge[http2]'`) — and every
later call reuses it, so a step costs no TLS set-up and, while the pool keeps the
connection, no connect either. `ModelRouter` keeps one provider per route and closes it
when the agent shuts down (`Agent.aclose`). A client is bound to the event loop that
created it; called from another loop (a test running `anyio.run` twice), `client()` builds
a fresh one instead of handing out a client whose connections belong to a dead loop.

The client's transport is a `SpreadTransport`: `pool_shards` httpcore connection pools
behind the one client, each request going to the pool with the fewest calls in flight (the
first on a tie, so calls one after another keep reusing one connection). httpcore's pool
scans every connection and every request on each request it admits and each response it
closes (and polls each idle socket), so at 100 calls in flight one pool costs a server a
quarter of its CPU; eight pools of an eighth of the connections each cost a fraction of
that. They share one TLS context, built once per process (`tls_context`: loading the CA
bundle costs tens of milliseconds, which every provider's client paid). Each pool keeps as
many idle connections as it may open (httpcore closes idle ones as soon as a pool holds
more connections than its keep-alive limit, so a lower limit would reconnect on every call
under load); idle ones close after `keepalive_expiry_s`.

`BoundedBody` is the response body `CallClock.bound` hands back (`deadlines.py`), kept
beside the pool's own body wrapper: both subclass httpx's, and this is the one module of
the HTTP providers that imports httpx when it loads (the others when a call needs it, so
offering a route costs a start no httpx).

    class MyProvider:
        def __init__(self, config: MyConfig) -> None:
            self._http = PooledClient(HttpSettings(connect_timeout_s=10, read_timeout_s=120))

        async def stream(self, request):
            client = await self._http.client()
            async with client.stream("POST", url, json=body) as reply: ...

        async def aclose(self) -> None:
            await self._http.aclose()

It never logs request bodies or headers (API keys travel in headers).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import httpx

if TYPE_CHECKING:
    from steerable_bridge.adapters.llm.deadlines import CallClock

__all__ = [
    "BoundedBody",
    "HttpSettings",
    "PooledClient",
    "SpreadTransport",
    "http2_available",
    "tls_context",
]

log = logging.getLogger(__name__)


def http2_available() -> bool:
    """Whether httpx can speak HTTP/2 here (the optional `h2` package is installed)."""
    return importlib.util.find_spec("h2") is not None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every model client verifies servers with: httpx's default (its CA
    bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` as httpx reads them when this is first
    called), built once per process and shared, as an `SSLContext` may be."""
    return httpx.create_ssl_context()


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSettings:
    """How a provider's client connects: timeouts and pool limits."""

    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    max_connections: int = 256
    """Connections open at once to the model server (more concurrent calls wait for one)."""
    keepalive_expiry_s: float = 60.0
    """An idle connection is closed after this long."""
    pool_shards: int = 8
    """Connection pools the requests are spread over (`SpreadTransport`)."""
    http2: bool | None = None
    """None: HTTP/2 when `h2` is importable (negotiated over TLS; plain http stays 1.1)."""

    def timeout(self) -> httpx.Timeout:
        # `pool` bounds the wait for a free connection when all `max_connections` are busy.
        return httpx.Timeout(
            self.read_timeout_s, connect=self.connect_timeout_s, pool=self.read_timeout_s
        )

    def shard_limits(self) -> httpx.Limits:
        """One pool's limits: its share of the connections, all of them kept alive."""
        share = max(1, math.ceil(self.max_connections / max(1, self.pool_shards)))
        return httpx.Limits(
            max_connections=share,
            max_keepalive_connections=share,
            keepalive_expiry=self.keepalive_expiry_s,
        )


class SpreadTransport(httpx.AsyncBaseTransport):
    """httpx's network transport, as `pool_shards` connection pools, each request going to
    the least busy one (see the module docstring); the process's one TLS context for all of
    them (`tls_context`)."""

    def __init__(self, settings: HttpSettings, *, http2: bool) -> None:
        verify = tls_context()  # load_verify_locations once, not per pool or client
        limits = settings.shard_limits()
        self._pools = [
            httpx.AsyncHTTPTransport(verify=verify, limits=limits, http2=http2)
            for _ in range(max(1, settings.pool_shards))
        ]
        self.in_flight = [0] * len(self._pools)
        """Calls each pool is serving now (from request to the response's close)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        busy = self.in_flight
        index = busy.index(min(busy))
        busy[index] += 1
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            busy[index] -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, busy, index)
        return response

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class PooledClient:
    """A lazily built, long-lived `httpx.AsyncClient` (see the module docstring).

    `transport` replaces httpx's network transport (tests pass `httpx.MockTransport`).
    """

    def __init__(
        self, settings: HttpSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._loop: object | None = None
        self.builds = 0
        """How many clients were built (one per event loop; tests assert reuse with it)."""

    async def client(self) -> httpx.AsyncClient:
        """The shared client, built on first use in this event loop."""
        loop = anyio.lowlevel.current_token()
        client = self._client
        if client is not None and not client.is_closed and self._loop == loop:
            return client
        if client is not None and self._loop == loop:
            log.debug("rebuilding a closed model HTTP client")
        settings = self.settings
        http2 = http2_available() if settings.http2 is None else settings.http2
        self._client = httpx.AsyncClient(
            transport=self._transport or SpreadTransport(settings, http2=http2),
            timeout=settings.timeout(),
        )
        self._loop = loop
        self.builds += 1
        return self._client

    async def aclose(self) -> None:
        """Close the client and its connections (a later `client()` builds a new one)."""
        client, self._client = self._client, None
        if client is None:
            return
        if self._loop != anyio.lowlevel.current_token():
            return  # its loop is gone: its sockets went with it
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await client.aclose()


class _Released(httpx.AsyncByteStream):
    """A response body that marks its pool's call finished when it is closed."""

    __slots__ = ("_busy", "_index", "_stream")

    def __init__(self, stream: httpx.AsyncByteStream, busy: list[int], index: int) -> None:
        self._stream: httpx.AsyncByteStream | None = stream
        self._busy = busy
        self._index = index

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert self._stream is not None, "the response body was closed"
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._busy[self._index] -= 1
            await stream.aclose()


class BoundedBody(httpx.AsyncByteStream):
    """A response body read under a `CallClock` (`CallClock.bound`, `deadlines.py`): each
    read gets its own cancel scope (never open across a `yield`), and a read that passes
    the deadline raises `model_timeout` after the cancellation closed the connection
    underneath."""

    __slots__ = ("_clock", "_stream")

    def __init__(self, stream: httpx.AsyncByteStream, clock: CallClock) -> None:
        self._stream = stream
        self._clock = clock

    async def __aiter__(self) -> AsyncIterator[bytes]:
        clock = self._clock
        reads = self._stream.__aiter__()
        while True:
            wait, which = clock.wait()
            if wait <= 0:  # a server that always has bytes ready must not outrun the clock
                raise clock.expired(which)
            chunk: bytes | None = None
            with anyio.move_on_after(wait):
                try:
                    chunk = await anext(reads)
                except StopAsyncIteration:
                    return
            if chunk is None:
                raise clock.expired(which)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
