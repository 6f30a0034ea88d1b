"""`BatchingSender`: every JSON-RPC frame sent in one event-loop tick leaves in one `write`.

A drop-in for the ACP SDK's `MessageSender` (the object its NDJSON transport sends through).
The SDK's sender queues each frame, writes it and waits for the write before the next, so a
turn streaming 200 tokens costs 200+ `write` syscalls and as many task switches. Here `send`
encodes the frame, appends it to a buffer and returns without yielding; the first frame of a
tick schedules one flush (`loop.call_soon`) that joins the buffer and writes it once, so
everything the loop renders from one model chunk — and frames from other sessions in the
same tick — goes out together, in the order sent. Back pressure is kept: when the pipe's
write buffer passes `HIGH_WATER` bytes, `send` waits (`drain`) until the client reads — at
most `send_timeout_s`, then it raises `TimeoutError` (a client that stopped reading), so a
caller needs no timer of its own per frame. A pipe that broke makes the next `send` raise
`ConnectionResetError`, which the session code treats as a lost client. Written here because
the SDK has no hook to batch writes. Frames are strict JSON in UTF-8 (no NaN, no lone
surrogates: see `_encode`), encoded by pydantic-core's serializer (a fifth of `json.dumps`'s
time on a `session/update` frame; the same bytes but for the spelling of some floats).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
from pydantic_core import PydanticSerializationError, to_json

from steerable_bridge.runtime.encoding.strict_json import scrub

__all__ = ["HIGH_WATER", "BatchingSender"]

log = logging.getLogger(__name__)

HIGH_WATER = 256 * 1024
"""Bytes buffered (ours plus the pipe transport's) above which `send` waits for the reader."""


def _encode(payload: dict[str, Any]) -> bytes:
    """One NDJSON line of strict JSON: a NaN or lone surrogate (say, echoed from a client's
    input in a validation error) is scrubbed rather than written as text no strict parser
    reads. The fast encoder writes a non-finite float as null, as `scrub` does (so no frame
    needs a scan for `NaN` / `Infinity` text), and refuses lone surrogates, which sends the
    frame down the careful path."""
    try:
        data = to_json(payload, inf_nan_mode="null")
    except (PydanticSerializationError, ValueError, TypeError):
        return _encode_strict(payload)
    return data + b"\n"


def _encode_strict(payload: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return (text + "\n").encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        log.warning("scrubbed a frame that was not strict JSON before writing it")
        text = json.dumps(scrub(payload), separators=(",", ":"), ensure_ascii=False)
        return (text + "\n").encode("utf-8")


class BatchingSender:
    """Buffers frames and writes each tick's frames with one `write` (see module docstring)."""

    def __init__(self, writer: asyncio.StreamWriter, *, send_timeout_s: float = 30.0) -> None:
        self._writer = writer
        self._transport = writer.transport
        self.send_timeout_s = send_timeout_s
        self._buffer: list[bytes] = []
        self._size = 0
        self._scheduled = False
        self._error: BaseException | None = None
        self._closed = False
        self._drain = asyncio.Lock()
        self._backlog = 0
        """The pipe transport's own buffer as of the last write: it only shrinks meanwhile
        (the reader drains it), so adding it to ours never underestimates what waits."""
        self._buffered = getattr(writer.transport, "get_write_buffer_size", None)
        self.writes = 0
        """How many `write` calls were made (benchmarks and tests read it)."""

    async def send(self, payload: dict[str, Any]) -> None:
        if self._error is not None:
            raise ConnectionResetError(f"the client's stdin is gone ({self._error})")
        if self._closed or self._transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        data = _encode(payload)
        self._buffer.append(data)
        self._size += len(data)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        if self._size + self._backlog > HIGH_WATER:  # ours plus the pipe's (`_backlog`)
            with anyio.fail_after(self.send_timeout_s):
                async with self._drain:
                    self._flush()
                    await self._wait_drained()

    def _flush(self) -> None:
        self._scheduled = False
        if not self._buffer:
            return
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        self._size = 0
        if self._error is not None:
            return
        try:
            self._writer.write(data)
            self.writes += 1
            if self._buffered is not None:
                self._backlog = self._buffered()
        except Exception as error:  # a closed pipe: later sends report it
            log.warning("writing to the client failed: %s", error)
            self._error = error

    async def _wait_drained(self) -> None:
        try:
            await self._writer.drain()
        except Exception as error:
            self._error = error
            raise ConnectionResetError(f"the client's stdin is gone ({error})") from error
        if self._buffered is not None:
            self._backlog = self._buffered()

    async def close(self) -> None:
        """Write what is buffered and wait until the pipe took it (bounded by the caller)."""
        if self._closed:
            return
        self._flush()
        self._closed = True
        if self._error is None:
            try:
                await self._writer.drain()
            except Exception as error:
                log.debug("the client's stdin closed before the last frames: %s", error)
