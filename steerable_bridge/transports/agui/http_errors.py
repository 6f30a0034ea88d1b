"""`json_error_protocol()`: uvicorn's HTTP/1.1 protocol, answering unparsable requests in JSON.

A request uvicorn's parser rejects (a `Content-Length` that is not a number, a malformed
request line or header) never reaches the app: uvicorn answers it itself with a plain-text
400. Clients of this server switch on `{"error": {"code", "message"}}`, so these classes
override only that answer (`send_400_response`) to carry the same shape, code
`bad_request`. The class follows uvicorn's own choice: httptools when it is installed,
else h11. Used by `commands/serve.py` (`uvicorn.Config(http=...)`), behind the guard of
`head_guard.py` that bounds heads, bodies and connections.
"""

from __future__ import annotations

import asyncio
import json

from steerable_bridge.transports.agui.head_guard import (
    ConnectionBudget,
    ConnectionLimits,
    guarded,
)

__all__ = ["json_error_protocol"]


def _body(message: str) -> bytes:
    text = f"the request is not valid HTTP ({message}); check its request line and headers"
    return json.dumps({"error": {"code": "bad_request", "message": text}}).encode()


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
