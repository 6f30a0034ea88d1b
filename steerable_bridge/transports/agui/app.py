"""The AG-UI HTTP app: `create_app(port)`, a Starlette app other ASGI apps can mount.

It reaches the agent through the agent port only (`runtime/ports/port.py`: our runtime as
`LocalPort(agent)`, or a bridged agent); `max_threads` / `thread_ttl_s` bound the threads
it keeps in memory.

Routes: `POST /agent` takes a `RunAgentInput` and answers with the run as a
`text/event-stream` of AG-UI events; `GET /health` reports status, model, protocol version,
the names of the tools the agent offers (the chat page suggests only what they can do), its
modes and what it can do with a conversation (`capabilities`: load, fork, list, steer, as
the port says — a bridged agent may not do all) —
when a token is configured, only to a request that carries it: without, it answers a plain
`ok` (liveness for probes, nothing about the agent);
`GET /` serves the built-in chat page (`static/index.html`, its scripts and styles under
`GET /static/…`, see `static_files.py`); the thread routes
(`thread_routes.py`, shapes in docs/agui-routes.md) list the caller's threads, answer one
thread's snapshot, resume its stream after an SSE id, delete it, and answer the
capabilities. Who sends a request is the `identity`'s to say (`identity.py`: one user
behind the token by default, or users by JWT or a trusted proxy's header); with users told
apart, a thread is its creator's and any other user's request for it — runs, steers and
stops included — is answered 404 `thread_not_found`, like a thread that does not exist,
checked again once the thread is held so a thread created meanwhile is not reached either.
The HTTP rules live here,
before any run starts: with `allowed_hosts`, a foreign `Host` (421) or `Origin` (403) is
refused first (`guard.py`, against cross-site requests and DNS rebinding); a bearer token
when one is configured (401); the body (`body.py`): `application/json` only (415), a size
limit checked on `Content-Length` and on the bytes read (413), strict JSON (422); schema
validation (422 with the errors); and one run per thread, in this process or any other
sharing the store (409 — unless the request asks to steer or stop with
`forwardedProps.steerable.steer` / `.stop: true`; see `control.py`). The port decides, before
anything is sent: its reservation refuses a second request here, and its `prompt` raises
`SessionOwned` when another process runs the thread, which gets the same 409 (naming that
process), not a stream. In a burst (while other threads' histories are being read) a plain
run of a thread not read yet opens its stream first (`Threads.prepare(defer=True)`): its
RUN_STARTED waits for no load, and what can only be found once the history is read (the
store failing, another process owning the thread) ends that stream with RUN_ERROR instead. With
`max_runs`, a new run beyond that many streaming at once in this process is refused with
503, `Retry-After` and code `too_many_runs` (steer and stop requests still pass); a run
whose client left has its conversation closed in memory (it reloads from the store),
and `on_idle()` is called when the last run of a burst (`BURST_RUNS` at once) ends (`serve`
collects garbage then). CORS is added only for the origins given. Every error body is
`{"error": {"code", "message"}}`, the message naming the remedy — a bug too (500,
`internal_error`; the traceback only in the log) — and a store that refuses before a stream
begins (507 `storage_full` for a full disk, else 503 with the store's code; once
streaming, a RUN_ERROR with that code). The app's lifespan relays signals from
other processes to the turns this one runs (`port.relay_signals`), runs the host's
`services` (long-lived tasks such as `serve`'s release after a burst; started in its task
group, cancelled when it ends) and shuts the agent
down when the server stops (`port.aclose`: model providers' pooled HTTP clients, the
store); a host that mounts the app without running its lifespan calls `port.aclose()`
itself. With `metrics` given, `GET /metrics` serves them as Prometheus text
(`metered.py`), behind `metrics_token` (or, single-user, the bearer token).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
from ag_ui.core import PROTOCOL_VERSION, RunAgentInput
from anyio.abc import TaskStatus
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from steerable_bridge import __version__
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.ports.port import AgentPort, Reservation
from steerable_bridge.runtime.ports.storage import (
    STORAGE_FULL,
    SessionBusy,
    SessionOwned,
    StoreError,
)
from steerable_bridge.transports.agui.body import BodyError, read_json
from steerable_bridge.transports.agui.control import Control, ControlRefusal
from steerable_bridge.transports.agui.guard import WebGuard
from steerable_bridge.transports.agui.identity import AuthRefused, Identity, SingleUser, bearer
from steerable_bridge.transports.agui.inputs import (
    InputError,
    resumable_requested,
    stop_requested,
)
from steerable_bridge.transports.agui.metered import (
    HttpMetrics,
    Produce,
    metered,
    metrics_response,
)
from steerable_bridge.transports.agui.static_files import StaticFiles
from steerable_bridge.transports.agui.stream import EventStream, StreamRefused, Write
from steerable_bridge.transports.agui.thread_routes import ThreadRoutes, not_found
from steerable_bridge.transports.agui.threads import (
    DEFAULT_MAX_THREADS,
    DEFAULT_THREAD_TTL_S,
    Run,
    Thread,
    Threads,
)

RETRY_AFTER_S = 5
"""What a 503 for `max_runs` tells the client to wait before it retries."""
BURST_RUNS = 16
"""Runs at once that make a burst: `on_idle` is called when the last of them ends (never
after light, sequential traffic, where its pause would be pure cost)."""

__all__ = ["DEFAULT_MAX_BODY", "Service", "create_app"]


class Service(Protocol):
    """A long-lived task the app's lifespan runs: it calls `task_status.started()` once
    ready, and runs until cancelled (when the server stops)."""

    def __call__(self, *, task_status: TaskStatus[None]) -> Coroutine[Any, Any, None]: ...


DEFAULT_MAX_BODY = 1024 * 1024
log = logging.getLogger(__name__)


def error(
    status: int,
    code: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """The one error body shape: `{"error": {"code", "message", ...}}`."""
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status, headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """The last resort: a bug answers a JSON 500 (the traceback goes to the log only)."""
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return error(
        500,
        "internal_error",
        "the server failed on this request (a bug; the log has the details); retry, and"
        " report it if it repeats",
    )


async def _store_error(request: Request, exc: Exception) -> Response:
    """The session store refused before a stream began: its code and remedy, 507 for a full
    disk (the client may retry once space is freed), else 503."""
    code = getattr(exc, "code", "store_unavailable")
    log.warning("%s %s: the session store failed: %s", request.method, request.url.path, exc)
    return error(507 if code == STORAGE_FULL else 503, code, str(exc))


def _ignore() -> None:
    """A disconnect that changes nothing (the client resumes the stream)."""


class _Server:
    """The endpoints, around one `Threads`."""

    def __init__(
        self,
        port: AgentPort,
        *,
        token: str | None,
        max_body: int,
        keepalive_s: float,
        cwd: str | None,
        metrics: HttpMetrics | None = None,
        max_runs: int | None = None,
        on_idle: Callable[[], None] | None = None,
        max_threads: int = DEFAULT_MAX_THREADS,
        thread_ttl_s: float = DEFAULT_THREAD_TTL_S,
        identity: Identity | None = None,
        metrics_token: str | None = None,
    ) -> None:
        self.port = port
        self.identity: Identity = identity or SingleUser(token)
        self.metrics_token = metrics_token
        self.on_idle = on_idle
        self.max_runs = max_runs
        self.running = 0
        """Runs this process streams now (`max_runs` caps them)."""
        self.peak = 0
        """The most runs at once since the last time none ran."""
        self.metrics = metrics
        self.threads = Threads(port, cwd=cwd, max_threads=max_threads, thread_ttl_s=thread_ttl_s)
        self.control = Control(port, self.threads, keepalive_s=keepalive_s)
        self.token = token
        self.max_body = max_body
        self.keepalive_s = keepalive_s
        self.static = StaticFiles()
        self.routes = ThreadRoutes(
            port, self.threads, self.identity, error, keepalive_s=keepalive_s, version=__version__
        )

    async def health(self, request: Request) -> Response:
        if not await self._known(request):  # liveness only: who runs here is not for anyone
            return PlainTextResponse("ok")
        info = self.port.info()
        return JSONResponse(
            {
                "status": "ok",
                "version": __version__,
                "model": info.default_model,
                "protocolVersion": PROTOCOL_VERSION,
                "auth": self.identity.name != "none",
                "authMode": self.identity.name,
                "tools": sorted(info.tools),
                "modes": [mode for mode, _, _ in info.modes],
                "capabilities": {
                    "load": info.can_load,
                    "fork": info.can_fork,
                    "list": info.can_list,
                    "steer": info.can_steer,
                },
            }
        )

    async def metrics_page(self, request: Request) -> Response:
        if self.metrics is None:
            return error(404, "not_found", "this server serves no metrics")
        token = self.metrics_token
        if token is None and not self.identity.multi_user:
            token = self.token  # single-user: the one token opens everything
        given = bearer(request)
        if token is not None and (
            given is None or not hmac.compare_digest(given.encode(), token.encode())
        ):
            return error(
                401,
                "unauthorized",
                "/metrics needs its own bearer token: send 'Authorization: Bearer <token>'"
                " with the --metrics-token the server was started with (or --token in"
                " single-user mode)",
            )
        if token is None and self.identity.multi_user:
            return error(
                401,
                "unauthorized",
                "with --auth jwt or header, /metrics is served only with --metrics-token;"
                " restart with it and send that token",
            )
        return metrics_response(self.metrics)

    async def _known(self, request: Request) -> bool:
        try:
            await self.identity.user(request)
        except AuthRefused:
            return False
        return True

    async def agent_run(self, request: Request) -> Response | EventStream:
        started = time.perf_counter()
        user = await self.routes.who(request)
        if isinstance(user, Response):
            return user
        run = await self._read_run(request)
        if isinstance(run, Response):
            return run
        routes = self.routes
        if await routes.owned_by_other(user, run.thread_id):
            return not_found(error, run.thread_id)
        claimed = await self.threads.claim(run.thread_id)
        # once more now the thread is held (or busy): its creator may have created it while
        # the first look was on its way, and then this request must still not reach it
        if routes.identity.multi_user and await routes.owned_by_other(user, run.thread_id):
            if claimed is not None:
                claimed[1].release()
            return not_found(error, run.thread_id)
        if claimed is None:
            return await self._busy(run, None)
        thread, hold = claimed
        if stop_requested(run):
            hold.release()
            return await self._busy(run, None)
        if self.max_runs is not None and self.running >= self.max_runs:
            hold.release()  # a steer for a turn another process runs still passes
            forwarded = await self.control.forward(run)
            if isinstance(forwarded, EventStream):
                return forwarded
            return self._full()
        prepared = await self._prepare(request, thread, hold, run, user)
        if isinstance(prepared, Response):
            return prepared
        return self._stream(run, prepared, started)

    async def _read_run(self, request: Request) -> RunAgentInput | Response:
        """The request's body as a `RunAgentInput`, or the error response that refuses it."""
        try:
            data = await read_json(request, self.max_body)
        except ClientDisconnect:
            return Response(status_code=400)
        except BodyError as err:
            return error(err.status, err.code, err.message, **err.extra)
        try:
            return RunAgentInput.model_validate(data)
        except ValidationError as err:
            return error(
                422,
                "invalid_input",
                "the body is not a valid AG-UI RunAgentInput; fix the fields listed in 'details'",
                details=json.loads(err.json(include_url=False, include_input=False)),
            )

    async def _prepare(
        self,
        request: Request,
        thread: Thread,
        hold: Reservation,
        run: RunAgentInput,
        user: str | None,
    ) -> Run | Response:
        """The run of the claimed thread, or the error response (and `hold` let go)."""
        try:
            traceparent = request.headers.get("traceparent")
            defer = self.threads.loading > 0  # a burst: its first event waits for no load
            return await self.threads.prepare(
                thread, hold, run, traceparent=traceparent, user=user, defer=defer
            )
        except InputError as err:
            hold.release()
            return error(422, err.code, err.message)
        except RouteError as err:  # a bridged agent that is not running, say
            hold.release()
            return error(503, err.code, err.message)
        except BaseException:
            hold.release()
            raise

    def _stream(self, run: RunAgentInput, prepared: Run, started: float) -> EventStream:
        """The response that streams `prepared`, counted in `running` until it closes."""
        self.running += 1
        self.peak = max(self.peak, self.running)

        def release() -> None:
            self.running -= 1
            prepared.close()
            if self.running == 0:
                burst, self.peak = self.peak >= BURST_RUNS, 0
                if burst and self.on_idle is not None:
                    self.on_idle()

        async def run_or_refuse(write: Write) -> None:
            try:
                await prepared.produce(write)
            except SessionBusy as err:  # another process runs the thread (or took it since)
                owner = err.owner if isinstance(err, SessionOwned) else None
                raise StreamRefused(await self._busy(run, owner)) from None

        produce: Produce = run_or_refuse
        if self.metrics is not None:
            produce = metered(produce, self.metrics, started)
        return EventStream(
            produce,
            # a client that will resume the stream leaves the turn running when it goes
            on_disconnect=_ignore if resumable_requested(run) else prepared.disconnect,
            on_close=release,
            keepalive_s=self.keepalive_s,
        )

    def _full(self) -> Response:
        return error(
            503,
            "too_many_runs",
            f"this server is already running {self.max_runs} runs at once, its limit; retry"
            f" after {RETRY_AFTER_S} seconds, or start it with a higher --max-runs"
            " (STEERABLE_MAX_RUNS)",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    async def _busy(self, run: RunAgentInput, owner: str | None) -> Response | EventStream:
        answer = await self.control.answer(run, owner)
        if isinstance(answer, ControlRefusal):
            return error(answer.status, answer.code, answer.message)
        return answer


def create_app(
    port: AgentPort,
    *,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    cors_origins: Sequence[str] = (),
    keepalive_s: float = 15.0,
    cwd: str | None = None,
    metrics: HttpMetrics | None = None,
    allowed_hosts: Sequence[str] | None = None,
    any_ip_host: bool = False,
    max_runs: int | None = None,
    on_idle: Callable[[], None] | None = None,
    max_threads: int = DEFAULT_MAX_THREADS,
    thread_ttl_s: float = DEFAULT_THREAD_TTL_S,
    identity: Identity | None = None,
    metrics_token: str | None = None,
    services: Sequence[Service] = (),
) -> Starlette:
    """The AG-UI app serving the agent behind `port` (see the module docstring)."""
    server = _Server(
        port,
        token=token,
        max_body=max_body,
        keepalive_s=keepalive_s,
        cwd=cwd,
        metrics=metrics,
        max_runs=max_runs,
        on_idle=on_idle,
        max_threads=max_threads,
        thread_ttl_s=thread_ttl_s,
        identity=identity,
        metrics_token=metrics_token,
    )
    middleware = []
    if allowed_hosts is not None:  # outermost: nothing runs for a foreign Host or Origin
        middleware.append(
            Middleware(
                WebGuard,
                allowed_hosts=allowed_hosts,
                cors_origins=cors_origins,
                any_ip=any_ip_host,
            )
        )
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=[
                    "Authorization",
                    "Content-Type",
                    "Accept",
                    "traceparent",
                    "Last-Event-ID",
                ],
            )
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tasks:
                await tasks.start(port.relay_signals)
                for service in services:
                    await tasks.start(service)
                yield
                tasks.cancel_scope.cancel()
        finally:
            await port.aclose()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/agent", server.agent_run, methods=["POST"]),
            Route("/agent/capabilities", server.routes.capabilities, methods=["GET"]),
            Route("/agent/threads", server.routes.list_threads, methods=["GET"]),
            Route("/agent/threads/{thread_id}", server.routes.snapshot, methods=["GET"]),
            Route("/agent/threads/{thread_id}", server.routes.delete, methods=["DELETE"]),
            Route("/agent/threads/{thread_id}/events", server.routes.events, methods=["GET"]),
            Route("/health", server.health, methods=["GET"]),
            Route("/", server.static.page, methods=["GET"]),
            Route("/static/{name:path}", server.static.file, methods=["GET"]),
            *([Route("/metrics", server.metrics_page, methods=["GET"])] if metrics else []),
        ],
        middleware=middleware,
        exception_handlers={StoreError: _store_error, Exception: _internal_error},
    )
    app.state.threads = server.threads
    app.state.port = port
    return app
