"""The stdio entry of the ACP agent: JSON-RPC frames on stdin / stdout, logs on stderr.

`serve(agent)` connects the SDK's `AgentSideConnection` (unstable methods routed, so
`session/close`, `session/resume` and `session/fork` work) to the process's stdio through
`GuardedTransport`, the SDK's newline-delimited JSON transport with three additions the SDK
lacks, each written here because no SDK hook covers it:

- a frame that is not JSON gets a JSON-RPC parse error (-32700), a frame that is not a
  request object gets invalid request (-32600) — the SDK drops the first with a traceback
  and dies on the second; either way the process keeps serving;
- methods the SDK 0.12.1 has no route for (`session/delete`, `logout`, `$/cancel_request`)
  are delivered to the agent's `ext_method` / `ext_notification` under `GAP_PREFIX`;
- it remembers which request ids are `session/prompt`s in flight, so `$/cancel_request`
  can cancel the right turn;
- frames go out through `BatchingSender`: those sent in one event-loop tick share one
  `write` (order kept), instead of one syscall and one task switch per notification.

Before anything is served, file descriptor 1 is pointed at stderr and the protocol keeps a
private copy of stdout, so neither a stray `print` nor a child process can corrupt the
JSON-RPC stream. When the client closes stdin, running turns are cancelled, requests
already read are answered (within `EOF_GRACE_S`), the agent is shut down (`Agent.aclose`:
model providers' HTTP clients, the store) and the process exits.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
from acp import RequestError, stdio_streams
from acp._transport import NdjsonTransport
from acp.agent.connection import AgentSideConnection
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.task import MessageSender

from steerable_bridge.runtime.model import ModelInfo
from steerable_bridge.transports.acp.batching import BatchingSender
from steerable_bridge.transports.acp.extensions import GAP_PREFIX
from steerable_bridge.transports.acp.front import LazyAcpAgent

if TYPE_CHECKING:  # loaded after `initialize` is answered (see front.py)
    from steerable_bridge.runtime.agent import Agent
    from steerable_bridge.transports.acp.client_env import AcpWorkspaces
    from steerable_bridge.transports.acp.session import EnvironmentChooser

__all__ = ["EOF_GRACE_S", "GAP_METHODS", "GuardedTransport", "serve"]

log = logging.getLogger("steerable_bridge.acp")

EOF_GRACE_S = 5.0
"""How long requests read before stdin closed may take to answer before the process exits."""

GAP_METHODS = frozenset({"session/delete", "logout", "$/cancel_request"})
"""Spec methods the SDK does not route; they reach the agent's extension handlers."""


def _error(request_id: Any, error: RequestError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_obj()}


class GuardedTransport(NdjsonTransport):
    """The SDK's NDJSON transport, answering malformed frames and routing SDK gaps."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prompts: dict[Any, str] = {}
        """Request id → session id of every `session/prompt` still unanswered."""
        self.unanswered: set[Any] = set()
        """Ids of every request received and not answered yet."""

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message and ("result" in message or "error" in message):
            self.prompts.pop(message.get("id"), None)
            self.unanswered.discard(message.get("id"))
        await super().send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as error:
                log.warning("answered a frame that is not JSON with a parse error: %s", error)
                await self.send(
                    _error(
                        None,
                        RequestError(
                            -32700,
                            f"parse error: the frame is not JSON ({error}); send one JSON-RPC"
                            " object per line",
                            {"code": "parse_error"},
                        ),
                    )
                )
                continue
            problem = _invalid(message)
            if problem is not None:
                log.warning("answered an invalid request: %s", problem)
                request_id = message.get("id") if isinstance(message, dict) else None
                if not isinstance(request_id, str | int):
                    request_id = None
                await self.send(
                    _error(request_id, RequestError(-32600, problem, {"code": "invalid_request"}))
                )
                continue
            return self._route(message)

    def _route(self, message: dict[str, Any]) -> dict[str, Any]:
        method = message.get("method")
        if "id" in message:
            self.unanswered.add(message["id"])
        if method == "session/prompt" and "id" in message:
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
                self.prompts[message["id"]] = params["sessionId"]
        if method in GAP_METHODS:
            message = {**message, "method": f"_{GAP_PREFIX}{method}"}
            if not isinstance(message.get("params"), dict):
                message["params"] = {}
        return message


def _invalid(message: Any) -> str | None:
    if isinstance(message, list):
        return "invalid request: JSON-RPC batches are not supported; send one object per line"
    if not isinstance(message, dict):
        return "invalid request: a frame must be a JSON-RPC object"
    if message.get("jsonrpc") != "2.0":
        return 'invalid request: "jsonrpc" must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'invalid request: "method" must be a string'
        if "id" in message and not isinstance(message["id"], str | int):
            return 'invalid request: "id" must be a string or an integer'
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return 'invalid request: a frame needs "method" (request) or "id" with "result"/"error"'
    return None


async def _protocol_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin / stdout for JSON-RPC only: fd 1 is pointed at stderr, so neither a stray
    `print` nor a child process that inherits stdout can write into the protocol stream."""
    pollable = _pollable(0) and _pollable(1)
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(protocol_out, write_through=True)  # what the SDK writes to
    if pollable:
        streams = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        sys.stdout = sys.stderr
        return streams
    # A file or /dev/null: epoll refuses those, so use the SDK's thread-fed streams (they
    # keep writing to `sys.stdout`, which stays the protocol's copy).
    from acp.stdio import _windows_stdio_streams as thread_stdio_streams

    loop = asyncio.get_running_loop()
    return await thread_stdio_streams(loop, limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)


def _pollable(fd: int) -> bool:
    """Whether asyncio can watch `fd` (a pipe, socket or terminal, not a file or /dev/null)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def configure_logging(level: str, file: str | None = None) -> None:
    """Logs to stderr (and `file`), never stdout."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if file:
        handlers.append(logging.FileHandler(file))
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


async def serve(
    build: Callable[[], Agent],
    *,
    info: ModelInfo | None,
    model: str,
    workspaces: Callable[[], AcpWorkspaces] | None = None,
    choose_environment: EnvironmentChooser | None = None,
) -> None:
    """Serve one ACP client on stdin / stdout until it closes stdin.

    `initialize` is answered from `info` (the default model's) and `model` at once; `build`
    (the runtime `Agent`) and `workspaces` (per-session workspace mounting) are called
    right after, so their imports never delay the handshake (see `front.py`).
    """
    reader, writer = await _protocol_streams()
    transport = GuardedTransport(reader, cast(MessageSender, BatchingSender(writer)))
    mounted: list[AcpWorkspaces] = []
    async with anyio.create_task_group() as tg:

        def spawn(job: Any) -> None:
            tg.start_soon(job)

        def build_acp_agent() -> Any:
            from steerable_bridge.transports.acp.agent import AcpAgent

            agent = build()
            mounted.extend([workspaces()] if workspaces is not None else [])
            options: dict[str, Any] = {}
            if choose_environment is not None:
                options["choose_environment"] = choose_environment
            return AcpAgent(
                agent,
                spawn=spawn,
                prompt_requests=transport.prompts,
                workspaces=mounted[0] if mounted else None,
                **options,
            )

        front = LazyAcpAgent(
            build_acp_agent,
            info=info,
            model=model,
            workspaces=workspaces is not None,
            spawn=spawn,
        )
        # Plain classes on purpose (see agent.py): they only structurally resemble acp.Agent.
        conn = AgentSideConnection(
            cast(Any, front), transport, listening=False, use_unstable_protocol=True
        )
        try:
            await conn.listen()
        finally:
            if front.built is not None:
                for state in list(front.built.sessions.values()):
                    if state.token is not None:
                        state.token.cancel("the client closed the connection")
            # stdin is closed, but requests read before it still get their answers.
            with anyio.move_on_after(EOF_GRACE_S, shield=True):
                while transport.unanswered:  # noqa: ASYNC110 - the SDK's tasks answer them
                    await anyio.sleep(0.01)
            for mount in mounted:  # stop MCP servers before their tasks are cancelled
                await mount.aclose()
            if front.built is not None:
                with anyio.move_on_after(EOF_GRACE_S, shield=True):
                    await front.built.agent.aclose()
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await conn.close()
