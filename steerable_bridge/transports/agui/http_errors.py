"""`json_error_protocol()`: uvicorn's HTTP/1.1 protocol, answering unparsable requests in JSON.

A request uvicorn's parser rejects (a `Content-Length` that is not a number, a malformed
request line or header) never reaches the app: uvicorn answers it itself with a plain-text
400. Clients of this server switch on `{"error": {"code", "message"}}`, so these classes
override only that answer (`send_400_response`) to carry the same shape, code
`bad_request`. They also bound what a client that stops reading can make this process
hold: each connection's kernel send buffer is fixed at `SEND_BUFFER_BYTES` (so a stream's
`send` waits after that much, and the run with it), and each request is offered the
`steerable.abort` scope extension (`stream.py`: drop a connection whose client stopped
reading, and its buffer). The class follows uvicorn's own choice: httptools when it is
installed, else h11. Used by `commands/serve.py` (`uvicorn.Config(http=...)`), behind the
guard of `head_guard.py` that bounds heads, bodies and connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

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
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            _bound_send_buffer(transport)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            _offer_abort(self)

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
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            _bound_send_buffer(transport)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            _offer_abort(self)

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
