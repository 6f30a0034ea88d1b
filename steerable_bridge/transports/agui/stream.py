"""The SSE response: an ASGI callable that runs a producer and streams what it writes.

`EventStream(produce, on_disconnect=...)` runs `produce(write)` together with two helpers in
a task group of its own, and sends the `text/event-stream` head with the first frame: a
watcher that reads the request channel and calls `on_disconnect()` the moment the client
goes away (the transport uses it to cancel the turn, so cancellation takes milliseconds, not
the next write — it sees the disconnect even while a send is blocked), and a writer.
`write(data)` never raises and never yields while fewer than `buffer_bytes` bytes wait: it
appends the frame to one buffer (one of `buffer_bytes` or more that finds it empty, a long
snapshot, is kept as it is, not copied in and out), and the writer sends what piled up as
one body chunk, so a burst of events costs one socket write. A slow client makes the
producer wait (backpressure): the server's `send` waits while its transport holds more than
its high-water mark, so what one stream holds is bounded by that mark plus `buffer_bytes`
plus one chunk, whatever the client does. The writer also sends an SSE comment when nothing
was written for `keepalive_s`, so proxies keep an idle stream open. After a disconnect, a
failed send or a send the client does not take within `send_timeout_s` (logged once as a
warning, and the connection is dropped through the server's `steerable.abort` extension when
it offers one, so the server frees what it buffered for that client), data is dropped and
the disconnect reported once. The helpers end with the producer without being cancelled
where the server allows it (a cancelled task costs an exception and a traceback, garbage a
busy server collects in pauses every stream waits through): the writer drains and returns,
and the watcher returns when the server reports the response complete (uvicorn does);
`on_close()` runs once, right after the last body went out (before the client can send a
next request on the connection), or last, whatever happened. Until the first frame nothing
is sent, so a producer that finds it must not run after all (it lost a race for its session)
raises `StreamRefused(response)` before writing, and the client gets that response (a 409)
instead of a stream. Frames are bytes the caller already encoded (`wire.py`); this module
adds no framing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ABORT_EXTENSION", "KEEPALIVE", "EventStream", "StreamRefused", "Write"]

log = logging.getLogger(__name__)

Write = Callable[[bytes], Awaitable[None]]
KEEPALIVE = b": keep-alive\n\n"
ABORT_EXTENSION = "steerable.abort"
"""A scope extension the server may offer (`http_errors.py` does): a callable that drops the
connection at once, discarding what is buffered for it, for a client that stopped reading."""
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class StreamRefused(Exception):
    """Raised by a producer before its first write: answer `response` instead."""

    def __init__(self, response: ASGIApp) -> None:
        super().__init__("the stream was refused before it began")
        self.response = response


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
        buffer_bytes: int = 32 * 1024,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        self._produce = produce
        self._on_disconnect = on_disconnect
        self._on_close = on_close
        self._keepalive_s = keepalive_s
        self._send_timeout_s = send_timeout_s
        self._buffer_bytes = buffer_bytes
        self._headers = HEADERS + (headers or [])
        self._queued = bytearray()
        """The frames waiting for the writer, joined as they come: one buffer from malloc,
        not a small object per frame (a burst of streams nobody reads left thousands of
        those in CPython's small-object arenas, keeping the arenas after it ended)."""
        self._whole: bytes | None = None
        """A frame of `buffer_bytes` or more that came to an empty queue (a long thread's
        MESSAGES_SNAPSHOT): sent as it is, before `_queued`, not copied into it and out."""
        self._queued_bytes = 0
        self._scope: Scope | None = None
        self._wake: anyio.Event | None = None
        """Set to wake the writer (it waits for frames, or for the producer's end)."""
        self._room: anyio.Event | None = None
        """Set by the writer when it took the queue (a producer waits on it when full)."""
        self._produced = False
        self._send: Send | None = None
        self._headed = False
        self._complete = False
        self._closed = False
        self.disconnected = False

    def _lost(self) -> None:
        if not self.disconnected:
            self.disconnected = True
            self._queued = bytearray()
            self._whole = None
            self._queued_bytes = 0
            self._on_disconnect()
            self._notify()

    def _stuck(self) -> None:
        """The client took nothing for `send_timeout_s`: end the run, drop the connection."""
        if self.disconnected:
            return
        log.warning(
            "an AG-UI client read nothing for %gs; its run is cancelled and the connection closed",
            self._send_timeout_s,
        )
        self._lost()
        abort = (self._scope or {}).get("extensions", {}).get(ABORT_EXTENSION)
        if callable(abort):
            abort()  # the server drops what it buffered for this client, now

    def _notify(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()
        room, self._room = self._room, None
        if room is not None:
            room.set()

    async def _write(self, data: bytes) -> None:
        """Queue a frame without yielding; wait (bounded) only when the queue is full. The
        first frame goes out at once with the head (the writer would take one more pass of
        the event loop, and on a busy server that pass is what a new client waits for)."""
        if self.disconnected or not data:
            return
        if not self._headed and self._send is not None:
            sent = False
            with anyio.move_on_after(self._send_timeout_s), contextlib.suppress(OSError):
                await self._head(self._send)
                await self._send({"type": "http.response.body", "body": data, "more_body": True})
                sent = True
            if not sent:
                self._stuck()
            # Let the loop run others before this run goes on to call the model: in a burst
            # of new requests each gets its first frame out before any sets up a model call.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        if self._queued_bytes >= self._buffer_bytes:
            room = self._room = self._room or anyio.Event()
            with anyio.move_on_after(self._send_timeout_s):
                await room.wait()
            if self._queued_bytes >= self._buffer_bytes:
                self._stuck()
            if self.disconnected:
                return
        if not self._queued and self._whole is None and len(data) >= self._buffer_bytes:
            self._whole = data
        else:
            self._queued += data
        self._queued_bytes += len(data)
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

    async def _writer(self, send: Send) -> None:
        """Send queued frames, joining whatever has piled up into one body chunk; an SSE
        comment after `keepalive_s` without frames. Returns once the producer is done and
        everything it wrote went out (or the client is gone)."""
        while not self.disconnected:
            if not self._queued and self._whole is None:
                if self._produced:
                    return
                wake = self._wake = anyio.Event()
                with anyio.move_on_after(self._keepalive_s):
                    await wake.wait()
                idle = not self._queued and self._whole is None
                idle = idle and not self._produced and not self.disconnected
                if idle and self._headed:  # before the first frame the stream is not open
                    self._queued += KEEPALIVE
                continue
            if self._whole is not None:
                body, self._whole = self._whole, None
                self._queued_bytes -= len(body)
            else:
                body = bytes(self._queued)
                self._queued = bytearray()
                self._queued_bytes = 0
            room, self._room = self._room, None
            if room is not None:
                room.set()
            sent = False
            with anyio.move_on_after(self._send_timeout_s), contextlib.suppress(OSError):
                await self._head(send)
                await send({"type": "http.response.body", "body": body, "more_body": True})
                sent = True
            del body  # not held while waiting for the next frames
            if not sent:
                self._stuck()

    async def _head(self, send: Send) -> None:
        if not self._headed:
            self._headed = True
            await send({"type": "http.response.start", "status": 200, "headers": self._headers})

    async def _watch(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                if not self._complete:  # after the last body it means "response complete"
                    self._lost()
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused: StreamRefused | None = None
        self._send = send
        self._scope = scope
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, receive)
                async with anyio.create_task_group() as writing:
                    writing.start_soon(self._writer, send)
                    try:
                        await self._produce(self._write)
                    except StreamRefused as refusal:
                        refused = refusal
                    finally:
                        self._produced = True
                        self._notify()
                if refused is not None and not self._headed:
                    self._complete = True
                    await refused.response(scope, receive, send)
                elif not self.disconnected:
                    if refused is not None:
                        log.error("a stream was refused after it began; it ends here")
                    self._complete = True
                    with anyio.move_on_after(self._send_timeout_s), contextlib.suppress(OSError):
                        await self._head(send)
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    # The client may send its next request the moment it reads the end:
                    # close (free the thread) before yielding to the loop even once.
                    self._close()
                    # uvicorn wakes the watcher with http.disconnect now; let it return
                    # before ending whatever is still waiting by cancellation.
                    await anyio.lowlevel.cancel_shielded_checkpoint()
                tg.cancel_scope.cancel()
        finally:
            self._produced = True
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._on_close()
