"""The stdio entry of the ACP agent: JSON-RPC frames on stdin / stdout, logs on stderr.

`serve(agent)` connects the SDK's `AgentSideConnection` (unstable methods routed, so
`session/close`, `session/resume` and `session/fork` work) to the process's stdio through
`GuardedTransport`, a newline-delimited JSON transport (the SDK's `Transport` protocol) with
four things the SDK's own lacks, each written here because no SDK hook covers it:

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
JSON-RPC stream. While it serves, the composition root's `background` job runs beside the
connection (for our runtime: the relay that brings signals from other processes sharing the
store — a cancel or steer sent to another server — to the turns this one runs). When the
client closes stdin, running turns are cancelled, requests already read are answered
(within `EOF_GRACE_S`), the background job is stopped, the agent port is shut down
(`AgentPort.aclose`: for our runtime, model providers' HTTP clients and the store) and the
process exits.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
from acp import stdio_streams
from acp.agent.connection import AgentSideConnection
from acp.connection import MethodHandler
from acp.task import MessageSender

from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.transports.acp.batching import BatchingSender
from steerable_bridge.transports.acp.capabilities import session_features
from steerable_bridge.transports.acp.extensions import GAP_PREFIX
from steerable_bridge.transports.acp.frames import (
    MAX_FRAME_BYTES,
    FrameRefusal,
    check_frame,
    frame_too_large,
)
from steerable_bridge.transports.acp.front import LazyAcpAgent
from steerable_bridge.transports.acp.sdk_private import thread_stdio_streams, wrap_handler

if TYPE_CHECKING:  # loaded after `initialize` is answered (see front.py)
    from steerable_bridge.runtime.ports.port import AgentPort
    from steerable_bridge.transports.acp.client_env import AcpWorkspaces
    from steerable_bridge.transports.acp.session import EnvironmentChooser

__all__ = [
    "EOF_GRACE_S",
    "GAP_METHODS",
    "GuardedTransport",
    "quiet_notifications",
    "route_message",
    "serve",
]

log = logging.getLogger("steerable_bridge.acp")

EOF_GRACE_S = 5.0
"""How long requests read before stdin closed may take to answer before the process exits."""

GAP_METHODS = frozenset({"session/delete", "logout", "$/cancel_request"})
"""Spec methods the SDK does not route; they reach the agent's extension handlers."""


class GuardedTransport:
    """NDJSON frames from `reader` behind the frame gate, routing SDK gaps, out to `sender`."""

    def __init__(self, reader: asyncio.StreamReader, sender: MessageSender) -> None:
        self._reader = reader
        self._out = sender
        """Where every frame goes (`BatchingSender` in `serve`)."""
        self.prompts: dict[Any, str] = {}
        """Request id → session id of every `session/prompt` still unanswered."""
        self.unanswered: set[Any] = set()
        """Ids of every request received and not answered yet."""
        self.session_features = (False, False)
        """(notices, compaction) the last `initialize` advertised (`session_features`)."""

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message and ("result" in message or "error" in message):
            self.prompts.pop(message.get("id"), None)
            self.unanswered.discard(message.get("id"))
        await self._out.send(message)  # BatchingSender writes strict JSON only

    async def close(self) -> None:
        await self._out.close()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line, size = await self._read_frame()
            if size == 0:
                return None
            if size > MAX_FRAME_BYTES:
                await self._refuse(frame_too_large(size))
                continue
            line = line.strip(b" \t\r\n")  # JSON's whitespace only
            if not line:
                continue
            try:
                checked = check_frame(line)
                if isinstance(checked, FrameRefusal):
                    await self._refuse(checked)
                    continue
                return self._route(checked)
            except Exception:  # a bug in the gate must cost one frame, not the process
                log.exception("answered a frame the gate failed on with an internal error")
                await self._refuse(
                    FrameRefusal(
                        None,
                        -32603,
                        "internal error while reading this frame; the agent keeps serving",
                        "internal_error",
                    )
                )

    async def _refuse(self, refusal: FrameRefusal) -> None:
        if refusal.code == -32700:
            log.warning("answered a frame that is not JSON with a parse error: %s", refusal.message)
        else:
            log.warning("answered an invalid frame with %s: %s", refusal.code, refusal.message)
        await self.send(refusal.answer())

    async def _read_frame(self) -> tuple[bytes, int]:
        """The next line (b"" at end of input) and its size; a line over `MAX_FRAME_BYTES`
        is read to its end but not kept."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                part = await self._reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                part = await self._reader.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:
                part = exc.partial
                done = True
            size += len(part)
            if size <= MAX_FRAME_BYTES:
                chunks.append(part)
            elif chunks:
                chunks.clear()
            if done:
                return b"".join(chunks), size

    def _route(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("method") == "initialize":  # the SDK's models drop v1.25 capabilities
            self.session_features = session_features(message.get("params"))
        return route_message(message, self.prompts, self.unanswered)


def route_message(
    message: dict[str, Any], prompts: dict[Any, str], unanswered: set[Any]
) -> dict[str, Any]:
    """A checked client frame as the SDK should see it: requests are remembered in
    `unanswered` (and prompts in `prompts`), SDK gaps renamed to extension methods,
    positional params replaced by an empty object. Shared with the remote transport."""
    method = message.get("method")
    if "id" in message and method is not None:
        unanswered.add(message["id"])
    if method == "session/prompt" and "id" in message:
        params = message.get("params")
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            prompts[message["id"]] = params["sessionId"]
    if method in GAP_METHODS:
        message = {**message, "method": f"_{GAP_PREFIX}{method}"}
    if method is not None and not isinstance(message.get("params"), dict):
        # the SDK's router reads params as an object; positional params name nothing
        message = {**message, "params": {}}
    return message


def quiet_notifications(handler: MethodHandler) -> MethodHandler:
    """`handler`, logging a notification it fails on in one line instead of a traceback."""

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        if not is_notification:
            return await handler(method, params, is_notification)
        try:
            return await handler(method, params, is_notification)
        except Exception as error:  # no one to answer: log it, keep serving
            log.info(
                "ignored the notification %s: %s",
                method[:80],
                error,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            return None

    return handle


async def _protocol_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin / stdout for JSON-RPC only: fd 1 is pointed at stderr, so neither a stray
    `print` nor a child process that inherits stdout can write into the protocol stream."""
    pollable = _pollable(0) and _pollable(1)
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(protocol_out, write_through=True)  # what the SDK writes to
    if pollable:
        streams = await stdio_streams(limit=MAX_FRAME_BYTES)
        sys.stdout = sys.stderr
        return streams
    # A file or /dev/null: epoll refuses those, so use the SDK's thread-fed streams (they
    # keep writing to `sys.stdout`, which stays the protocol's copy).
    return await thread_stdio_streams(limit=MAX_FRAME_BYTES)


def _pollable(fd: int) -> bool:
    """Whether asyncio can watch `fd` (a pipe, socket or terminal, not a file or /dev/null)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


async def serve(
    build: Callable[[], AgentPort],
    *,
    info: ModelInfo | None,
    model: str,
    workspaces: Callable[[], AcpWorkspaces] | None = None,
    choose_environment: EnvironmentChooser | None = None,
    permission_timeout_s: float = 300.0,
    background: Callable[[AgentPort], Awaitable[None]] | None = None,
    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None,
) -> None:
    """Serve one ACP client on stdin / stdout until it closes stdin.

    `initialize` is answered from `info` (the default model's) and `model` at once; `build`
    (the agent port) and `workspaces` (per-session workspace mounting) are called right
    after, so their imports never delay the handshake (see `front.py`). `background(port)`
    then runs for as long as the connection serves and is cancelled before the port is
    shut down; `permission_timeout_s` bounds each `session/request_permission`. `streams`
    replaces stdin / stdout with a client's (reader, writer) pair, for a client in this
    process (`tools/prompt_path.py`); stdio is then left as it is.
    """
    reader, writer = streams if streams is not None else await _protocol_streams()
    transport = GuardedTransport(reader, cast(MessageSender, BatchingSender(writer)))
    mounted: list[AcpWorkspaces] = []
    relaying = anyio.CancelScope()
    async with anyio.create_task_group() as tg:

        def spawn(job: Any) -> None:
            tg.start_soon(job)

        def build_acp_agent() -> Any:
            from steerable_bridge.transports.acp.agent import AcpAgent

            port = build()
            mounted.extend([workspaces()] if workspaces is not None else [])
            if background is not None:
                spawn(functools.partial(_beside, background, port, relaying))
            options: dict[str, Any] = {}
            if choose_environment is not None:
                options["choose_environment"] = choose_environment
            return AcpAgent(
                port,
                spawn=spawn,
                prompt_requests=transport.prompts,
                workspaces=mounted[0] if mounted else None,
                permission_timeout_s=permission_timeout_s,
                session_features=lambda: transport.session_features,
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
        # The SDK logs a traceback for every notification it cannot route; nobody awaits
        # a notification's outcome, so a bad one is worth a line, not a traceback.
        wrap_handler(conn, quiet_notifications)
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
            relaying.cancel()  # before the port closes (a relay would reopen the store)
            if front.built is not None:
                with anyio.move_on_after(EOF_GRACE_S, shield=True):
                    await front.built.port.aclose()
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await conn.close()


async def _beside(
    job: Callable[[AgentPort], Awaitable[None]], port: AgentPort, scope: anyio.CancelScope
) -> None:
    """Run `job(port)` until it returns or `scope` is cancelled."""
    with scope:
        await job(port)
