"""The SSE response: an ASGI callable that runs a producer and streams what it writes.

`EventStream(produce, on_disconnect=...)` sends the `text/event-stream` head, then runs
`produce(write)` inside a task group of its own together with two helpers: a watcher that
reads the request channel and calls `on_disconnect()` the moment the client goes away (the
transport uses it to cancel the turn, so cancellation takes milliseconds, not the next
write), and a keep-alive that sends an SSE comment every `keepalive_s` so proxies keep an
idle stream open. `write(data)` never raises and never yields while its queue has room: a
writer task sends what piled up as one body chunk, so a burst of events costs one socket
write, and a slow client only makes the producer wait (bounded) once `buffer_frames` are
queued. After a disconnect, a failed send or a send the client does not take within
`send_timeout_s`, data is dropped and the disconnect reported once. The helpers end with the
producer; `on_close()` runs last, whatever happened.
Frames are bytes the caller already encoded (`wire.py`); this module adds no framing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio
from starlette.types import Message, Receive, Scope, Send

__all__ = ["KEEPALIVE", "EventStream", "Write"]

Write = Callable[[bytes], Awaitable[None]]
KEEPALIVE = b": keep-alive\n\n"
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class EventStream:
    """An ASGI response streaming what `produce` writes (see the module docstring)."""

    def __init__(
        self,
        produce: Callable[[Write], Awaitable[None]],
        *,
        on_disconnect: Callable[[], None] = lambda: None,
        on_close: Callable[[], None] = lambda: None,
        keepalive_s: float = 15.0,
        send_timeout_s: float = 30.0,
        buffer_frames: int = 4096,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        self._produce = produce
        self._on_disconnect = on_disconnect
        self._on_close = on_close
        self._keepalive_s = keepalive_s
        self._send_timeout_s = send_timeout_s
        self._headers = HEADERS + (headers or [])
        self._tx, self._rx = anyio.create_memory_object_stream[bytes](buffer_frames)
        self.disconnected = False

    def _lost(self) -> None:
        if not self.disconnected:
            self.disconnected = True
            self._on_disconnect()

    async def _write(self, data: bytes) -> None:
        """Queue a frame without yielding; wait (bounded) only when the queue is full."""
        if self.disconnected or not data:
            return
        try:
            self._tx.send_nowait(data)
            return
        except anyio.WouldBlock:
            pass
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        with anyio.move_on_after(self._send_timeout_s) as waited:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._tx.send(data)
        if waited.cancelled_caught:
            self._lost()

    async def _writer(self, send: Send) -> None:
        """Send queued frames, joining whatever has piled up into one body chunk."""
        async with self._rx:
            async for first in self._rx:
                parts = [first]
                while True:
                    try:
                        parts.append(self._rx.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if self.disconnected:
                    continue
                sent = False
                with anyio.move_on_after(self._send_timeout_s), contextlib.suppress(OSError):
                    body = b"".join(parts)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    sent = True
                if not sent:
                    self._lost()

    async def _watch(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self._lost()
                return

    async def _keepalive(self) -> None:
        while True:
            await anyio.sleep(self._keepalive_s)
            await self._write(KEEPALIVE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self._headers})
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, receive)
                tg.start_soon(self._keepalive)
                async with anyio.create_task_group() as writing:
                    writing.start_soon(self._writer, send)
                    try:
                        await self._produce(self._write)
                    finally:
                        self._tx.close()
                tg.cancel_scope.cancel()
            if not self.disconnected:
                with anyio.move_on_after(self._send_timeout_s), contextlib.suppress(OSError):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._tx.close()
            self._on_close()
