"""Remote ACP: the same agent over Streamable HTTP and WebSocket on one `/acp` endpoint.

The SDK's experimental `acp.http` core does the protocol: `AcpServer` mints an
`Acp-Connection-Id` on the `initialize` POST (answered 200 with the JSON-RPC response), other
POSTs are 202 and their answers come over SSE (`GET` with the connection id, optionally with
`Acp-Session-Id` for a session's own stream), `DELETE` ends the connection, and a WebSocket
upgrade on the same path carries every message both ways as text frames. What this module
adds around it, each because the SDK core lacks it:

- each connection gets our agent the way stdio does: a `LazyAcpAgent` over an `AcpAgent` on
  the one shared agent port, the SDK's unstable methods routed, SDK gaps renamed and prompts
  tracked (`route_message`; the connections are `remote_connections.py`), so sessions
  survive a reconnect (`session/load` from a new connection) and behaviour matches
  `steerable-bridge acp`;
- every frame is checked (`frames.check_frame`) before the SDK sees it: bad JSON is a 400
  carrying the JSON-RPC parse error (on a WebSocket: that error as a frame), and the
  connection keeps serving; bodies past `max_body` are 413, WebSocket messages past it close
  the socket (uvicorn's `ws_max_size`);
- a bearer token, when set, on every request and on the upgrade (401 otherwise);
- a session's messages go to its own SSE stream only while someone listens on it, else to
  the connection's stream — so a client that opens only the connection stream (the RFD's
  latest revision) gets everything, and one that opens session streams (both official SDKs)
  gets them there; a session stream may be opened for a session established on another
  connection (the SDK core refuses it, which breaks `session/load` after a reconnect);
- every stream has a deadline (`stream_deadline_s`); a connection whose stream is not opened
  within `attach_timeout_s` of `initialize` is dropped; when the connection's stream or the
  WebSocket closes, the connection ends: its running prompts are cancelled, its workspaces
  unmounted, its tasks cancelled. Connections at once are capped (`max_connections`, 503).

Host / Origin checks and head bounds are the server's around this app (the command composes
them). The shared port is built and closed by the app's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp.http.protocol import (
    CONNECTION_ID_HEADER,
    CONTENT_TYPE_SSE,
    SESSION_ID_HEADER,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.transports.acp.frames import FrameRefusal, check_frame, frame_too_large
from steerable_bridge.transports.acp.front import LazyAcpAgent
from steerable_bridge.transports.acp.remote_connections import (
    CLOSE_GRACE_S,
    RemoteConnection,
    RemoteServer,
    TooManyConnections,
)
from steerable_bridge.transports.acp.sdk_private import (
    serialize_sse_event,
    serialize_sse_keepalive,
)

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.port import AgentPort
    from steerable_bridge.transports.acp.client_env import AcpWorkspaces

__all__ = ["ENDPOINT", "RemoteSettings", "create_remote_app"]

log = logging.getLogger("steerable_bridge.acp.remote")

ENDPOINT = "/acp"
KEEPALIVE_S = 15.0
"""An idle SSE stream sends a comment this often (what the SDKs use), so proxies keep it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteSettings:
    """What the remote server allows one client."""

    token: str | None = None
    max_body: int = 4 * 1024 * 1024
    """Bytes in one POST body or WebSocket message."""
    stream_deadline_s: float = 24 * 3600.0
    """The longest one SSE stream or WebSocket stays open."""
    attach_timeout_s: float = 60.0
    """How soon after `initialize` the connection's stream must be opened."""
    max_connections: int = 64
    permission_timeout_s: float = 300.0


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status, headers=headers)


class TokenGuard:
    """Refuses HTTP requests and WebSocket upgrades without `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "token required"})
            return
        response = _error(
            401,
            "token_required",
            "this ACP server needs its token: send 'Authorization: Bearer <token>' with the"
            " --token it was started with",
            **{"www-authenticate": "Bearer"},
        )
        await response(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        for key, value in scope["headers"]:
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self.token)
        return False


class ListenedStream(StreamingResponse):
    """An SSE response that runs `release` when it ends, however it ends (sent in full,
    client gone before or during the body, cancelled)."""

    def __init__(
        self, body: AsyncIterator[bytes], release: Callable[[], Awaitable[None]], **kwargs: Any
    ) -> None:
        super().__init__(body, **kwargs)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.release())


class RemoteEndpoint:
    """The `/acp` routes over one `RemoteServer`."""

    def __init__(self, server: RemoteServer, settings: RemoteSettings) -> None:
        self.server = server
        self.settings = settings

    async def post(self, request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        if not content_type.lower().startswith("application/json"):
            return _error(
                415, "unsupported_media_type", "POST a JSON-RPC message as application/json"
            )
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        body = body.strip(b" \t\r\n")
        if body.startswith(b"["):
            return _error(
                501,
                "batch_not_supported",
                "ACP takes one JSON-RPC message per POST; send them one at a time",
            )
        checked = check_frame(body)
        if isinstance(checked, FrameRefusal):
            log.warning("answered a POST body that is not a JSON-RPC message: %s", checked.message)
            return JSONResponse(checked.answer(), 400)
        connection_id = request.headers.get(CONNECTION_ID_HEADER)
        session_id = request.headers.get(SESSION_ID_HEADER)
        if not self.server.admit_session(connection_id, session_id):
            return _error(429, "too_many_sessions", "this connection uses too many sessions")
        try:
            result = await self.server.handle_post(
                checked,
                content_type=content_type,
                connection_id=connection_id,
                session_id=session_id,
            )
        except TooManyConnections:
            return self._busy()
        if result.status == 200 and CONNECTION_ID_HEADER in result.headers:
            self._expect_stream(result.headers[CONNECTION_ID_HEADER])
        if result.body is None:
            return Response(status_code=result.status, headers=result.headers)
        if "error" in result.body and isinstance(result.body["error"], str):
            code = {400: "bad_request", 404: "not_found", 501: "not_implemented"}
            return _error(
                result.status,
                code.get(result.status, "refused"),
                f"{result.body['error']}; initialize first and send the {CONNECTION_ID_HEADER}"
                f" (and {SESSION_ID_HEADER} for a session's methods) it answered with",
            )
        return JSONResponse(result.body, result.status, headers=result.headers)

    async def _body(self, request: Request) -> bytes | Response:
        limit = self.settings.max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return self._too_large(int(declared))
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return self._too_large(size)
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, size: int) -> Response:
        return _error(
            413,
            "body_too_large",
            f"the message has {size} bytes, more than this server's {self.settings.max_body};"
            " send a smaller one (or start the server with a larger --max-body)",
        )

    def _busy(self) -> Response:
        return _error(
            503,
            "too_many_connections",
            "this server holds as many ACP connections as it allows; retry later",
            **{"retry-after": "5"},
        )

    def _expect_stream(self, connection_id: str) -> None:
        state = self.server.remote.remote(connection_id)
        if state is None:
            return

        async def watch() -> None:
            try:
                async with asyncio.timeout(self.settings.attach_timeout_s):
                    await state.attached.wait()
            except TimeoutError:
                log.info("dropped connection %s: its stream was never opened", connection_id)
                await self.server.remote.remove(connection_id)

        state.spawn(watch)

    async def get(self, request: Request) -> Response:
        accept = request.headers.get("accept", "")
        if CONTENT_TYPE_SSE not in accept and "*/*" not in accept:
            return _error(406, "not_acceptable", "open the stream with Accept: text/event-stream")
        connection_id = request.headers.get(CONNECTION_ID_HEADER)
        session_id = request.headers.get(SESSION_ID_HEADER)
        if not self.server.admit_session(connection_id, session_id):
            return _error(429, "too_many_sessions", "this connection uses too many sessions")
        problem = self.server.validate_stream(connection_id=connection_id, session_id=session_id)
        state = self.server.remote.remote(connection_id)
        if problem is not None or state is None:
            status = problem.status if problem is not None else 404
            return _error(
                status,
                "unknown_connection" if status == 404 else "bad_request",
                f"no ACP connection {connection_id!r} here; POST initialize to open one and"
                f" send its {CONNECTION_ID_HEADER}",
            )
        state.attached.set()
        if session_id is not None:  # counted before the client can see the stream open
            state.listeners[session_id] = state.listeners.get(session_id, 0) + 1

        async def release() -> None:
            if session_id is not None:
                state.listeners[session_id] -= 1
            else:  # the client went away (or the deadline passed): end its connection
                await self.server.remote.remove(state.connection_id)

        return ListenedStream(
            self._stream(state, session_id),
            release,
            media_type=CONTENT_TYPE_SSE,
            headers={"cache-control": "no-cache"},
        )

    async def _stream(
        self, state: RemoteConnection, session_id: str | None
    ) -> AsyncIterator[bytes]:
        stream = (
            state.ensure_session_stream(session_id)
            if session_id is not None
            else state.connection_stream
        )
        messages = stream.iterate()
        deadline = time.monotonic() + self.settings.stream_deadline_s
        pending: asyncio.Task[dict[str, Any]] | None = None
        try:
            while (left := deadline - time.monotonic()) > 0:
                if pending is None:
                    pending = asyncio.ensure_future(anext(messages))
                done, _ = await asyncio.wait({pending}, timeout=min(KEEPALIVE_S, left))
                if not done:
                    yield serialize_sse_keepalive()
                    continue
                try:
                    message = pending.result()
                except StopAsyncIteration:
                    return
                finally:
                    pending = None
                yield serialize_sse_event(message)
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending

    async def delete(self, request: Request) -> Response:
        result = await self.server.handle_delete(
            connection_id=request.headers.get(CONNECTION_ID_HEADER)
        )
        if result.status >= 400:
            return _error(
                result.status,
                "unknown_connection" if result.status == 404 else "bad_request",
                f"DELETE needs the {CONNECTION_ID_HEADER} of an open connection",
            )
        return Response(status_code=result.status)

    async def websocket(self, socket: WebSocket) -> None:
        try:
            state = self.server.create_websocket_connection()
        except TooManyConnections:
            await socket.close(1013, "too many connections; retry later")
            return
        assert isinstance(state, RemoteConnection)
        state.attached.set()
        header = (CONNECTION_ID_HEADER.lower().encode(), state.connection_id.encode())
        await socket.accept(headers=[header])
        outbound = asyncio.ensure_future(self._socket_out(state, socket))
        try:
            async with asyncio.timeout(self.settings.stream_deadline_s):
                await self._socket_in(state, socket)
        except (TimeoutError, WebSocketDisconnect):
            pass
        finally:
            outbound.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await outbound
            await self.server.remote.remove(state.connection_id)
            with contextlib.suppress(Exception):
                await socket.close()

    async def _socket_in(self, state: RemoteConnection, socket: WebSocket) -> None:
        while True:
            message = await socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                continue  # binary frames carry nothing in ACP
            raw = text.encode("utf-8", "surrogatepass")
            if len(raw) > self.settings.max_body:
                await socket.send_json(frame_too_large(len(raw)).answer())
                continue
            checked = check_frame(raw.strip(b" \t\r\n"))
            if isinstance(checked, FrameRefusal):
                log.warning("answered a WebSocket frame that is not JSON-RPC: %s", checked.message)
                await socket.send_json(checked.answer())
                continue
            await state.deliver_to_agent(checked)

    async def _socket_out(self, state: RemoteConnection, socket: WebSocket) -> None:
        async for message in state.iter_all_outbound():
            await socket.send_json(message)


def create_remote_app(
    build_port: Callable[[], AgentPort],
    *,
    info: ModelInfo | None,
    model: str,
    settings: RemoteSettings,
    workspaces: Callable[[], AcpWorkspaces] | None = None,
    background: Callable[[AgentPort], Awaitable[None]] | None = None,
) -> ASGIApp:
    """The ASGI app serving the agent port `build_port` makes (once, at start-up) on `/acp`
    to every remote client; `background(port)` runs while it serves (as for stdio)."""
    shared: list[AgentPort] = []

    def make_agent(conn: RemoteConnection) -> LazyAcpAgent:
        def build() -> Any:
            from steerable_bridge.transports.acp.agent import AcpAgent

            mount = workspaces() if workspaces is not None else None
            if mount is not None:
                conn.mounts.append(mount)
            return AcpAgent(
                shared[0],
                spawn=conn.spawn,
                prompt_requests=conn.messages.prompts,
                session_features=lambda: conn.messages.session_features,
                workspaces=mount,
                permission_timeout_s=settings.permission_timeout_s,
            )

        return LazyAcpAgent(
            build, info=info, model=model, workspaces=workspaces is not None, spawn=conn.spawn
        )

    server = RemoteServer(make_agent, settings.max_connections)
    endpoint = RemoteEndpoint(server, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        shared.append(build_port())
        job = asyncio.ensure_future(background(shared[0])) if background is not None else None
        try:
            yield
        finally:
            await server.close()
            if job is not None:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await job
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_GRACE_S):
                    await shared[0].aclose()

    app: ASGIApp = Starlette(
        routes=[
            Route(ENDPOINT, endpoint.post, methods=["POST"]),
            Route(ENDPOINT, endpoint.get, methods=["GET"]),
            Route(ENDPOINT, endpoint.delete, methods=["DELETE"]),
            WebSocketRoute(ENDPOINT, endpoint.websocket),
        ],
        lifespan=lifespan,
    )
    if settings.token:
        app = TokenGuard(app, settings.token)
    return app
