"""`steerable-bridge acp --listen HOST:PORT`: the `acp` agent served to remote clients.

The agent is composed exactly as for stdio (`acp.py`: the same port, tools, workspaces and
signal relay); `transports/acp/remote.py` serves it on `/acp` over Streamable HTTP and
WebSocket. This module adds what `serve` puts around its app: loopback by default, a token
required off loopback (`--token` / `STEERABLE_TOKEN`, or `--insecure-no-token`), the Host and
Origin checks (`agui/guard.py`'s `WebGuard`, which checks upgrades too), and uvicorn behind
the head guard (`agui/head_guard.py`: head size and time, body time, connections at once).
The bound URL is printed on a start-up line (`ACP endpoint http://HOST:PORT/acp`), so a
port of 0 can be found. To add an option, add it in `add_remote_options` and read it here.
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

from steerable_bridge.commands.errors import ConfigError

__all__ = ["SHUTDOWN_GRACE_S", "add_remote_options", "run_remote"]

SHUTDOWN_GRACE_S = 2
"""On SIGTERM / Ctrl-C, how long open streams and sockets may go on before they are cut."""


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    from steerable_bridge.commands.settings import ServeSettings

    parser.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="serve remote ACP clients on http://HOST:PORT/acp (Streamable HTTP and WebSocket)"
        " instead of stdin/stdout; PORT 0 picks a free one",
    )
    parser.add_argument(
        "--token",
        default=ServeSettings.lenient().token,
        help="with --listen: require 'Authorization: Bearer TOKEN' (default: $STEERABLE_TOKEN)",
    )
    parser.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="with --listen: allow a non-loopback HOST without --token",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --listen: also answer requests whose Host is NAME (repeatable)",
    )
    parser.add_argument(
        "--max-body",
        type=int,
        default=4 * 1024 * 1024,
        help="with --listen: largest POST body or WebSocket message in bytes (4 MiB)",
    )


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) as a bind address."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen {value}: give HOST:PORT, e.g. 127.0.0.1:8765 (PORT 0: any)")
    return host, int(port)


def run_remote(args: argparse.Namespace, *, build_port: Any, workspaces: Any, info: Any) -> int:
    """Serve the agent on `--listen` until interrupted."""
    import uvicorn

    from steerable_bridge.transports.acp.remote import ENDPOINT, RemoteSettings, create_remote_app
    from steerable_bridge.transports.agui.guard import WILDCARD_HOSTS, WebGuard, is_loopback
    from steerable_bridge.transports.agui.head_guard import ConnectionLimits, connection_budget
    from steerable_bridge.transports.agui.http_errors import json_error_protocol

    host, port = parse_listen(args.listen)
    if not (args.token or args.insecure_no_token or is_loopback(host)):
        raise ConfigError(
            f"--listen {args.listen} lets other machines reach the agent, and there is no token;"
            " pass --token (or STEERABLE_TOKEN), or --insecure-no-token if the network is trusted"
        )
    if args.max_body < 1:
        raise ConfigError("--max-body must be a positive number of bytes")
    settings = RemoteSettings(
        token=args.token or None,
        max_body=args.max_body,
        permission_timeout_s=args.permission_timeout,
    )
    from steerable_bridge.commands.relay import relay_signals

    app = create_remote_app(
        build_port,
        info=info,
        model=args.model,
        settings=settings,
        workspaces=workspaces,
        background=relay_signals,
    )
    guarded = WebGuard(
        app, allowed_hosts=[host, *args.allowed_host], any_ip=host.lower() in WILDCARD_HOSTS
    )
    limits = ConnectionLimits()
    budget = connection_budget(limits)
    sock = _bind(host, port, budget.backlog)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    print(
        f"steerable-bridge: ACP endpoint http://{shown}:{bound}{ENDPOINT}"
        f" (WebSocket ws://{shown}:{bound}{ENDPOINT})",
        flush=True,
    )
    config = uvicorn.Config(
        guarded,
        log_config=None,
        log_level=args.log_level,
        lifespan="on",
        http=json_error_protocol(limits, budget),
        ws="websockets-sansio",
        ws_max_size=args.max_body,
        backlog=budget.backlog,
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=limits.max_head_bytes,
        # streams stay open as long as their clients: on shutdown they are cut after this
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({err.strerror}); pick another --listen port"
        ) from None
    sock.listen(backlog)  # connections queue from the moment the URL is printed
    return sock
