"""`steerable-bridge serve`: the AG-UI endpoint and its chat page over HTTP.

Builds the agent from the shared options (`--model`, `--storage`, `--approve`), adds the
built-in tools with shared state (`update_state`), and serves `create_app` with uvicorn on
`--host` / `--port` (127.0.0.1:8000 by default; port 0 picks a free one, and the first two
lines on stdout give the URLs actually bound). `POST /agent` takes a RunAgentInput and
streams AG-UI events; `GET /` is the chat page. `--token` (or
`STEERABLE_TOKEN`) requires `Authorization: Bearer <token>`, and a `--host` other than
loopback refuses to start without one unless `--insecure-no-token`; `--cors-origin`
(repeatable) allows browser apps on other origins, and pages from any other origin are
refused (403), as are requests whose `Host` is not the bound address, localhost or an
`--allowed-host` (421, against DNS rebinding); `--max-body` bounds a request. Before any of
that, every connection is bounded by `serve_limits.py`'s options (`--max-head`,
`--head-timeout`, `--body-timeout`, `--max-connections`; 431 / 408 / 503, idle connections
shed oldest first, `transports/agui/head_guard.py`), sized to the file-descriptor limit.
`--max-runs N` (or `STEERABLE_MAX_RUNS`, default 256 per process) caps the runs streaming at
once: a new run beyond it gets 503 with `Retry-After`.
`--workspace DIR` adds the workspace tools, confined to DIR (and with no permission to ask,
the AG-UI approval interrupt guards edits and commands). `GET /metrics` serves Prometheus
metrics (runs, latencies, tokens, open streams, store appends; behind `--token` too). Logs
(uvicorn's too) go to stderr as `--log-level`, `--log-file` and `--log-format text|json` say
(`logs.py`). The standard `OTEL_*` variables turn on OpenTelemetry traces of every run
(`telemetry.py`). `--workers N` (or `STEERABLE_WORKERS`) serves the port from N processes
under uvicorn's supervisor (it restarts a worker that dies): the socket is bound once here
and inherited, each worker builds its own agent from the same options (`worker_app`, which
reads them from `STEERABLE_SERVE_OPTIONS`), and they share the store — SQLite or
PostgreSQL, never `memory` — which keeps a thread's run in one process and carries steer
and stop requests to it. `--acp-agent "CMD ARGS"` serves that ACP agent instead of our
model loop (bridge mode, `transports/acp/bridge`): our agent with the bridge as its turn
engine and the route `acp-agent:<name>`, the child process started and stopped by the
app's lifespan, its fs / terminal requests served inside `--workspace` (one worker only),
its sessions in a store of its own unless `--storage` says otherwise (`families.py`).
Stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import time
from typing import Any

from steerable_bridge.commands.common import add_agent_options, build_agent
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.heap import IdleRelease, settle_startup_heap
from steerable_bridge.commands.logs import add_log_options, configure_logging
from steerable_bridge.commands.serve_auth import add_auth_options, identity_from_args
from steerable_bridge.commands.serve_limits import add_limit_options, limits_from_args
from steerable_bridge.commands.storage_choice import check_storage
from steerable_bridge.commands.tool_processes import add_tool_process_options, command_policy


def register(subparsers: Any) -> None:
    from steerable_bridge.commands.settings import ServeSettings

    settings = ServeSettings.lenient()  # the defaults; a bad value is reported at start-up
    parser = subparsers.add_parser("serve", help="serve the AG-UI endpoint and a chat page")
    add_agent_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (8000; 0 = any)")
    parser.add_argument(
        "--max-body",
        type=int,
        default=1024 * 1024,
        help="largest request body in bytes (1 MiB); larger requests get 413",
    )
    parser.add_argument(
        "--token",
        default=settings.token,
        help="require 'Authorization: Bearer TOKEN' on POST /agent (default: $STEERABLE_TOKEN)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser requests from this origin (repeatable; none by default)",
    )
    parser.add_argument(
        "--cwd", type=os.path.abspath, default=os.getcwd(), help="working directory of sessions"
    )
    parser.add_argument(
        "--workspace",
        type=os.path.abspath,
        default=None,
        metavar="DIR",
        help="offer workspace tools (read, write, edit, list, glob, grep, run_command) confined"
        " to DIR, which also becomes the sessions' cwd; without it the agent has none",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host is NAME (repeatable; the bound address and"
        " localhost always work): other names are refused, against DNS rebinding",
    )
    parser.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="allow a non-loopback --host without --token (anyone who can reach it can run"
        " the agent)",
    )
    parser.add_argument(
        "--acp-agent",
        default=None,
        metavar='"CMD ARGS..."',
        help="serve this ACP agent (a command line, shell-split) instead of our own: each"
        " thread is a session of that agent, its fs/terminal requests are served inside"
        " --workspace (refused without one), and its permission requests become AG-UI"
        " interrupts",
    )
    add_limit_options(parser, settings)
    add_auth_options(parser, settings)
    parser.add_argument(
        "--max-runs",
        default=str(settings.max_runs),
        metavar="N",
        help="runs one process streams at once; beyond, POST /agent answers 503 with"
        f" Retry-After (default: $STEERABLE_MAX_RUNS or {DEFAULT_MAX_RUNS}; 0 = no limit)",
    )
    add_tool_process_options(parser)
    add_log_options(parser, default_level="info")
    parser.add_argument(
        "--workers",
        type=int,
        default=settings.workers,
        help="processes serving the port, sharing the store (default: $STEERABLE_WORKERS or 1)",
    )
    parser.set_defaults(func=main)


DEFAULT_MAX_RUNS = 256
"""Concurrent runs per process unless `--max-runs` / `STEERABLE_MAX_RUNS` say otherwise: each
holds a bounded stream buffer, a session and a model call, so the cap bounds the memory."""

SERVE_LOOP = "asyncio"
"""The event loop `serve` runs on: asyncio's own, not uvloop. Under load uvloop's listener
took new connections late — with 100 streams in flight 80-odd connections sat in the
kernel's accept queue and a new client's RUN_STARTED waited ~250 ms at p99; on asyncio's
loop the queue stays near empty (p99 ~100 ms) for the same CPU per run
(`bench/agui_concurrency.py`)."""

OPTIONS_ENV = "STEERABLE_SERVE_OPTIONS"
"""How `main` hands the parsed options to the worker processes it starts (JSON)."""


def main(args: argparse.Namespace) -> int:
    import uvicorn

    from steerable_bridge.transports.agui.guard import exposure_problem
    from steerable_bridge.transports.agui.head_guard import connection_budget
    from steerable_bridge.transports.agui.http_errors import json_error_protocol

    configure_logging(args)
    limits = limits_from_args(args)
    if args.max_body < 1:
        raise ConfigError("--max-body must be a positive number of bytes")
    if not 0 <= args.port <= 65535:
        raise ConfigError("--port must be between 0 and 65535")
    identity_from_args(args)  # a wrong combination of --auth options is reported first
    guard = args.token or (None if getattr(args, "auth", "token") == "token" else args.auth)
    problem = exposure_problem(args.host, token=guard, insecure=args.insecure_no_token)
    if problem is not None:
        raise ConfigError(problem)
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    if getattr(args, "acp_agent", None) is not None and args.workers > 1:
        raise ConfigError("--acp-agent runs one agent process per server; use --workers 1")
    max_runs(args)
    if args.workers > 1 and args.storage == "memory":
        raise ConfigError(
            "--workers needs a store the workers share: a SQLite file or postgresql://...,"
            " not --storage memory"
        )
    if getattr(args, "acp_agent", None) is not None:
        from steerable_bridge.commands.families import bridge_storage

        route = f"acp-agent:{agent_name(agent_command(args.acp_agent))}"
        args.storage = bridge_storage(args.storage, route)  # its own, unless told to share
    check_storage(args.storage)  # one line with the remedy, never a URL then a traceback
    app = build_app(args)  # every mistake in the options is reported here, before serving
    budget = connection_budget(limits)
    logging.getLogger(__name__).info(
        "up to %d connections at once (file-descriptor limit %d, accept burst %d)",
        budget.max_connections,
        budget.fd_limit,
        budget.backlog,
    )
    sock = _bind(args, budget.backlog)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if sock.family == socket.AF_INET6 else args.host
    print(f"steerable-bridge: AG-UI endpoint POST http://{shown}:{port}/agent", flush=True)
    print(f"steerable-bridge: chat page http://{shown}:{port}/", flush=True)
    from steerable_bridge.commands.startup import announce, startup_line

    announce(startup_line(args.model, args.storage, args.workspace), args.log_format)
    if args.workers == 1:
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level=args.log_level,
            lifespan="on",
            http=json_error_protocol(limits, budget),
            loop=SERVE_LOOP,
            backlog=budget.backlog,
            timeout_keep_alive=limits.keep_alive_s,
            h11_max_incomplete_event_size=limits.max_head_bytes,
            ws="none",  # no WebSocket routes: an upgrade must not hand the socket past the guard
            date_header=False,  # the server's tick makes it (`http_date`)
        )
        server = _server_class()(config)
        settle_startup_heap()
        server.run(sockets=[sock])
        return 0
    from uvicorn.supervisors import Multiprocess

    os.environ[OPTIONS_ENV] = json.dumps(_options(args))
    config = uvicorn.Config(  # by import path: the workers are spawned, not forked
        f"{__name__}:worker_app",
        factory=True,
        workers=args.workers,
        log_config=None,
        log_level=args.log_level,
        lifespan="on",
        http=f"{__name__}:WorkerHttpProtocol",
        loop=SERVE_LOOP,
        backlog=budget.backlog,
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=limits.max_head_bytes,
        ws="none",
    )
    Multiprocess(config, sockets=[sock]).run()
    return 0


def build_app(args: argparse.Namespace) -> Any:
    """The AG-UI app for the parsed options (its agent opens nothing until first used)."""
    from steerable_bridge.adapters.telemetry.metrics import ServerMetrics
    from steerable_bridge.adapters.tools.builtin import builtin_tools
    from steerable_bridge.commands.telemetry import tracing_observers

    if getattr(args, "acp_agent", None) is not None:
        return _bridge_app(args)
    tools = builtin_tools(shared_state=True)
    cwd = args.cwd
    if args.workspace is not None:
        from steerable_bridge.adapters.tools.kit import fixed_workspace_tools

        if not os.path.isdir(args.workspace):
            raise ConfigError(f"--workspace {args.workspace} is not a directory; pass a folder")
        names = {tool.name for tool in tools}
        offered = fixed_workspace_tools(args.workspace, policy=command_policy(args))
        tools += tuple(t for t in offered if t.name not in names)
        cwd = args.workspace
    metrics = ServerMetrics()
    observers = [metrics, *tracing_observers()]
    agent = build_agent(args, tools=tools, observers=observers, wrap_store=metrics.timed_store)
    return _port_app(agent, metrics=metrics, cwd=cwd, args=args)


def _port_app(agent: Any, *, metrics: Any, cwd: str, args: argparse.Namespace) -> Any:
    """The AG-UI app serving `agent` through the agent port (`LocalPort`), which lists
    only the sessions of its route family (`families.py`)."""
    from steerable_bridge.commands.families import family_filter
    from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
    from steerable_bridge.transports.agui.app import create_app

    return create_app(
        LocalPort(agent, family=family_filter(agent.config.model)),
        max_threads=agent.config.max_sessions,
        thread_ttl_s=agent.config.session_ttl_s,
        metrics=metrics,
        cwd=cwd,
        **_app_options(args, store=agent.store),
    )


def _app_options(args: argparse.Namespace, *, store: Any = None) -> dict[str, Any]:
    """What `create_app` takes from the options besides the agent, its metrics and cwd;
    after a burst, memory is released, and the connections `store` holds idle dropped
    (`shed_idle`, when the store has it)."""
    from steerable_bridge.transports.agui.guard import WILDCARD_HOSTS

    shed = getattr(store, "shed_idle", None)
    release = IdleRelease(shed=[shed] if shed is not None else [])

    return {
        "token": args.token or None,
        "identity": identity_from_args(args),
        "metrics_token": getattr(args, "metrics_token", None) or None,
        "max_body": args.max_body,
        "cors_origins": tuple(args.cors_origin),
        "allowed_hosts": (args.host, *args.allowed_host),
        "any_ip_host": args.host in WILDCARD_HOSTS,
        "max_runs": max_runs(args),
        "on_idle": release,
        "services": (release.run,),
    }


def _bridge_app(args: argparse.Namespace) -> Any:
    """`--acp-agent`: the AG-UI app over our agent whose turns the ACP bridge runs, with the
    child agent started and stopped by the app's lifespan (around the agent's own)."""
    from contextlib import asynccontextmanager

    from steerable_bridge.adapters.telemetry.metrics import ServerMetrics
    from steerable_bridge.commands.families import bridge_storage
    from steerable_bridge.commands.telemetry import tracing_observers
    from steerable_bridge.transports.acp.bridge import ROUTE_PROVIDER, AcpBridge
    from steerable_bridge.transports.acp.bridge.route import BridgedAgentRoute

    argv = agent_command(args.acp_agent)
    environment = None
    cwd = args.cwd
    if args.workspace is not None:
        from steerable_bridge.adapters.tools.local_env import LocalEnvironment
        from steerable_bridge.adapters.tools.paths import Workspace

        if not os.path.isdir(args.workspace):
            raise ConfigError(f"--workspace {args.workspace} is not a directory; pass a folder")
        environment = LocalEnvironment(Workspace.of(args.workspace), policy=command_policy(args))
        cwd = args.workspace
    name = agent_name(argv)
    bridge = AcpBridge(argv, environment=environment, cwd=cwd, name=name)
    args.model = f"{ROUTE_PROVIDER}:{name}"
    args.storage = bridge_storage(args.storage, args.model)  # its own, unless told to share
    metrics = ServerMetrics()
    agent = build_agent(
        args,
        observers=[metrics, *tracing_observers()],
        wrap_store=metrics.timed_store,
        engine=bridge,
        providers={ROUTE_PROVIDER: BridgedAgentRoute},
    )
    app = _port_app(agent, metrics=metrics, cwd=cwd, args=args)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with bridge.running(), inner(app) as state:
            yield state

    app.router.lifespan_context = lifespan
    return app


_LAUNCHERS = ("python", "node", "npx", "uvx", "uv", "bunx", "bun", "pnpm", "pipx", "deno")


def agent_command(line: str) -> list[str]:
    """`--acp-agent`'s command line, shell-split, or a `ConfigError` naming the remedy."""
    import shlex
    import shutil

    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise ConfigError(f"--acp-agent {line!r} is not a valid command line: {err}") from None
    if not argv:
        raise ConfigError('--acp-agent needs a command line, e.g. --acp-agent "codex-acp"')
    if shutil.which(argv[0]) is None:
        raise ConfigError(
            f"--acp-agent: {argv[0]!r} is not a program on PATH; install the agent or give"
            " its full path"
        )
    return argv


def agent_name(argv: list[str]) -> str:
    """A short name for the agent (its route `acp-agent:<name>`): the program, or for a
    launcher (`npx`, `python -m`, ...) the package it starts."""
    name = os.path.basename(argv[0])
    if name.startswith(_LAUNCHERS):
        package = next((a for a in argv[1:] if not a.startswith("-") and a != "run"), None)
        if package is not None:
            version = package.find("@", 1)  # a pinned version: pkg@1.2, @scope/pkg@1.2
            name = os.path.basename(package[:version] if version > 0 else package)
    return name.replace(":", "-") or "agent"


def max_runs(args: argparse.Namespace) -> int | None:
    """The `--max-runs` cap (None: no cap), or a `ConfigError` naming the remedy."""
    raw = str(args.max_runs).strip()
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(
            f"--max-runs / STEERABLE_MAX_RUNS={raw!r} is not a number of runs; give a whole"
            " number (0 = no limit)"
        )
    return value or None


def worker_app() -> Any:
    """A worker's app, from the options `main` left in `STEERABLE_SERVE_OPTIONS`."""
    raw = os.environ.get(OPTIONS_ENV)
    if not raw:
        raise ConfigError(f"{OPTIONS_ENV} is not set; start workers with serve --workers N")
    args = argparse.Namespace(**json.loads(raw))
    configure_logging(args)
    app = build_app(args)
    settle_startup_heap()
    return app


def __getattr__(name: str) -> Any:
    """`WorkerHttpProtocol`: the guarded JSON-error HTTP protocol, named by import path for
    workers (its limits from the options `main` left in `STEERABLE_SERVE_OPTIONS`)."""
    if name == "WorkerHttpProtocol":
        from steerable_bridge.transports.agui.head_guard import connection_budget
        from steerable_bridge.transports.agui.http_errors import json_error_protocol

        limits = limits_from_args(argparse.Namespace(**json.loads(os.environ[OPTIONS_ENV])))
        return json_error_protocol(limits, connection_budget(limits))
    raise AttributeError(name)


KERNEL_BACKLOG = 2048
"""Connections the kernel queues for accepting, once serving (asyncio's own `backlog` is
the smaller accept burst the connection budget allows, `head_guard.connection_budget`)."""


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, with the kernel's accept queue set back to `KERNEL_BACKLOG`
        after asyncio set it to its accept burst (`backlog`) when it started serving, and
        its once-a-second `Date` header made by `http_date` (the config says
        `date_header=False`, so uvicorn makes none)."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            for sock in sockets or ():
                sock.listen(KERNEL_BACKLOG)

        async def on_tick(self, counter: int) -> bool:
            if counter % 10 == 0:  # once a second, as uvicorn renews its default headers
                date = (b"date", http_date(time.time()))
                self.server_state.default_headers = [date, *self.config.encoded_headers]
            # uvicorn's checks (should it exit?) at a count that is not a whole second: on
            # those it formats a date (`formatdate`) even with `date_header=False`
            should_exit: bool = await super().on_tick(1)
            return should_exit

    return Server


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(now: float) -> bytes:
    """`now` as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`), as `email.utils.formatdate`
    with `usegmt` writes it. uvicorn's tick calls that every second, and through
    `datetime.timetuple` it looks `dst` up by a name made anew each call, which CPython's
    type attribute cache then keeps: a string a second, made after a burst in the memory
    it freed, each keeping an arena of the allocator from going back."""
    t = time.gmtime(now)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d}"
        f" {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    ).encode()


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The options as JSON-able values (the command's function is not an option, and each
    worker reads the settings from the environment it inherits)."""
    return {
        key: value for key, value in vars(args).items() if not callable(value) and key != "settings"
    }


def _bind(args: argparse.Namespace, backlog: int) -> socket.socket:
    from steerable_bridge.transports.agui.first_frames import CountingSocket

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # One process counts its accepts, so new runs' first frames go first; workers get the
    # socket through multiprocessing, which pickles only a plain `socket.socket` (their HTTP
    # protocol counts each request instead).
    kind = CountingSocket if getattr(args, "workers", 1) == 1 else socket.socket
    sock = kind(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as err:
        sock.close()
        raise ConfigError(
            f"cannot listen on {args.host}:{args.port} ({err.strerror}); pick another --port"
        ) from None
    sock.listen(backlog)  # connections queue from the moment the URL is printed
    return sock
