"""BatchingSender over a real pipe: one write per event-loop tick, order kept, a closed
reader reported as a lost connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import pytest

from steerable_bridge.transports.acp.batching import HIGH_WATER, BatchingSender

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the sender wraps asyncio's StreamWriter, as the SDK's stdio does


@asynccontextmanager
async def piped() -> AsyncIterator[tuple[BatchingSender, int]]:
    """A sender writing into a pipe; yields it and the pipe's read end."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    loop = asyncio.get_running_loop()
    protocol = asyncio.streams.FlowControlMixin()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, os.fdopen(write_fd, "wb"))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        yield BatchingSender(writer), read_fd
    finally:
        transport.close()
        with contextlib.suppress(OSError):
            os.close(read_fd)


def read_all(read_fd: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(read_fd, 1 << 20)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def frames_in(read_fd: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in read_all(read_fd).splitlines()]


async def test_frames_of_one_tick_leave_in_one_write_in_order() -> None:
    async with piped() as (sender, read_fd):
        for n in range(50):
            await sender.send({"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}})
        await anyio.lowlevel.checkpoint()  # the flush runs on the next tick
        await anyio.lowlevel.checkpoint()
        assert sender.writes == 1
        await sender.send({"jsonrpc": "2.0", "id": 1, "result": None})
        await sender.close()
        assert sender.writes == 2
        frames = frames_in(read_fd)
    assert [f["params"]["n"] for f in frames[:50]] == list(range(50))  # type: ignore[index]
    assert frames[50] == {"jsonrpc": "2.0", "id": 1, "result": None}


async def test_a_large_backlog_waits_for_the_reader() -> None:
    async with piped() as (sender, read_fd):
        big = "x" * (HIGH_WATER // 4)
        data = bytearray()

        async def read_slowly() -> None:
            while data.count(b"\n") < 12:
                await anyio.sleep(0.01)
                data.extend(read_all(read_fd))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_slowly)
            for n in range(12):
                await sender.send({"jsonrpc": "2.0", "method": "x", "params": {"n": n, "b": big}})
            await sender.close()
        received = [json.loads(line) for line in bytes(data).splitlines()]
        assert [f["params"]["n"] for f in received] == list(range(12))  # type: ignore[index]


async def test_a_closed_reader_is_reported_as_a_lost_connection() -> None:
    async with piped() as (sender, read_fd):
        os.close(read_fd)  # the client went away
        with pytest.raises(ConnectionResetError), anyio.fail_after(5):
            while True:  # the broken pipe shows on a later send
                await sender.send({"jsonrpc": "2.0", "method": "x", "params": {}})
                await anyio.sleep(0.01)


async def test_a_reader_that_stops_reading_times_the_sender_out() -> None:
    async with piped() as (sender, _read_fd):
        sender.send_timeout_s = 0.2
        big = "x" * (HIGH_WATER // 4)
        with pytest.raises(TimeoutError):  # nobody reads: the pipe fills, then the bound
            for n in range(64):
                await sender.send({"jsonrpc": "2.0", "method": "x", "params": {"n": n, "b": big}})
