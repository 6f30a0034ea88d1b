"""Run an ASGI app with uvicorn on 127.0.0.1, an OS-picked port, and say where on stdout.

The servers in this folder run in their own venvs (tests/interop/venvs.py), not the project's,
so they share only this file. `serve(app)` binds the socket itself (port 0) and listens on
it, prints `listening http://127.0.0.1:PORT` once (the parent reads that line to learn the
port, and may connect at once: the connection waits in the backlog), then hands the socket
to uvicorn, which runs until SIGTERM.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import uvicorn


def serve(app: Any) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from the moment the line is printed
    port = sock.getsockname()[1]
    print(f"listening http://127.0.0.1:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    sys.exit(0)
