"""`json_error_protocol()`: uvicorn's HTTP/1.1 protocol, answering unparsable requests in JSON.

A request uvicorn's parser rejects (a `Content-Length` that is not a number, a malformed
request line or header) never reaches the app: uvicorn answers it itself with a plain-text
400. Clients of this server switch on `{"error": {"code", "message"}}`, so these classes
override only that answer (`send_400_response`) to carry the same shape, code
`bad_request`. They also bound what a client that stops reading can make this process
hold: each connection's kernel send buffer is fixed at `SEND_BUFFER_BYTES` (so a stream's
`send` waits after that much, and the run with it), and each request is offered the
`steerable.abort` scope extension (`stream.py`: drop a connection whose client stopped
reading, and its buffer). Each request is counted in `first_frames.FIRST_FRAMES` from its
connection's accept (or, on a kept-alive connection, its parsed head) until its response
starts, so streaming runs give way to it. The class follows uvicorn's own choice: httptools
when it is installed, else h11. Used by `commands/serve.py` (`uvicorn.Config(http=...)`), behind the
guard of `head_guard.py` that bounds heads, bodies and connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

from steerable_bridge.transports.agui.first_frames import FIRST_FRAMES
from steerable_bridge.transports.agui.head_guard import (
    ConnectionBudget,
    ConnectionLimits,
    guarded,
)
from steerable_bridge.transports.agui.stream import ABORT_EXTENSION

__all__ = ["json_error_protocol"]


def _body(message: str) -> bytes:
    text = f"the request is not valid HTTP ({message}); check its request line and headers"
    return json.dumps({"error": {"code": "bad_request", "message": text}}).encode()


SEND_BUFFER_BYTES = 32 * 1024
"""The kernel's send buffer per connection (Linux doubles it for its bookkeeping). Left to
autotuning it grows to 4 MiB on loopback, and a run whose client reads nothing goes on
producing — and logging — until that much is queued: ~4 MB of memory per stuck run."""


WRITE_BUFFER_BYTES = 16 * 1024
"""The transport's high-water mark: uvicorn's `send` waits while more than this is queued."""


def _bound_send_buffer(transport: asyncio.BaseTransport) -> None:
    if isinstance(transport, asyncio.WriteTransport):
        transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


def _offer_abort(protocol: Any) -> None:
    """Give the request just parsed the `steerable.abort` extension (`stream.py`): uvicorn
    builds the scope and schedules the app while parsing, so the app, which starts on the
    loop's next pass, finds it there. Aborting drops the connection and what its transport
    buffered — for a client that stopped reading, whose buffer would otherwise stay."""
    cycle = getattr(protocol, "cycle", None)
    if cycle is None:
        return
    extensions = cycle.scope.setdefault("extensions", {})
    if ABORT_EXTENSION not in extensions:
        extensions[ABORT_EXTENSION] = protocol.transport.abort


class _FirstFrame:
    """One connection's part in `FIRST_FRAMES`: its current request counted until its
    response starts (or the connection is lost)."""

    __slots__ = ("cycle", "waiting")

    def __init__(self) -> None:
        self.cycle: object = None
        self.waiting = True
        """Counted now: a new connection is, from its accept."""
        if not FIRST_FRAMES.accepts_counted:  # no counting socket: counted from here
            FIRST_FRAMES.arrived()

    def answered(self) -> None:
        if self.waiting:
            self.waiting = False
            FIRST_FRAMES.answered()

    def parsed(self, protocol: Any) -> None:
        """After the protocol read data: a request whose head was just parsed is counted
        (a new connection's already is) and answered by its response's start."""
        cycle = getattr(protocol, "cycle", None)
        if cycle is None or cycle is self.cycle:
            return
        self.cycle = cycle
        if not self.waiting:
            self.waiting = True
            FIRST_FRAMES.arrived()
        send = cycle.send  # the app task, which starts on the loop's next pass, takes ours

        async def answering(message: Any) -> None:
            if self.waiting and message["type"] == "http.response.start" and self.cycle is cycle:
                self.answered()
            await send(message)

        cycle.send = answering


def json_error_protocol(
    limits: ConnectionLimits, budget: ConnectionBudget
) -> type[asyncio.Protocol]:
    """The HTTP protocol class to give uvicorn (see the module docstring), guarded."""
    return guarded(_json_error_protocol(), limits, budget)


def _json_error_protocol() -> type[asyncio.Protocol]:
    try:
        import httptools  # noqa: F401
    except ImportError:
        return _h11()
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
        _first: _FirstFrame | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._first = _FirstFrame()
            super().connection_made(transport)  # type: ignore[arg-type]
            _bound_send_buffer(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._first is not None:
                self._first.answered()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            _offer_abort(self)
            if self._first is not None:
                self._first.parsed(self)

        def send_400_response(self, msg: str) -> None:
            body = _body(msg)
            head = (
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head + body)
            self.transport.close()

    return JsonErrorHttpToolsProtocol


def _h11() -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class JsonErrorH11Protocol(H11Protocol):
        _first: _FirstFrame | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._first = _FirstFrame()
            super().connection_made(transport)  # type: ignore[arg-type]
            _bound_send_buffer(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._first is not None:
                self._first.answered()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            _offer_abort(self)
            if self._first is not None:
                self._first.parsed(self)

        def send_400_response(self, msg: str) -> None:
            body = _body(msg)
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers)))
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
            self.transport.close()

    return JsonErrorH11Protocol
