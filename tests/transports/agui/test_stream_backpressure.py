"""A client that stops reading: the stream holds a bounded amount for it and makes the run
wait (backpressure); past `send_timeout_s` the run is told its client is gone and the server
is asked to drop the connection (`steerable.abort`)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from starlette.types import Message

from steerable_bridge.transports.agui.stream import ABORT_EXTENSION, EventStream, Write

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

FRAME = b"data: " + b"x" * 1000 + b"\n\n"


async def test_a_stuck_client_blocks_the_producer_then_ends_the_run() -> None:
    sent: list[bytes] = []
    stuck = anyio.Event()
    gone = anyio.Event()
    aborted: list[bool] = []
    written = [0]

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])
            if len(sent) > 1:  # the client takes the first chunk, then nothing
                stuck.set()
                await anyio.sleep_forever()

    async def receive() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def produce(write: Write) -> None:
        for _ in range(10_000):  # 10 MB if nothing pushed back
            await write(FRAME)
            if gone.is_set():  # what the transport does: the run is cancelled
                return
            written[0] += 1

    stream = EventStream(
        produce,
        on_disconnect=gone.set,
        send_timeout_s=0.5,
        buffer_bytes=16 * 1024,
    )
    scope = {"type": "http", "extensions": {ABORT_EXTENSION: lambda: aborted.append(True)}}
    with anyio.fail_after(20):
        await stream(scope, receive, send)
    assert stuck.is_set() and gone.is_set() and aborted == [True]
    held = sum(len(chunk) for chunk in sent)
    assert held < 64 * 1024  # what went to the server for this client stayed bounded
    assert written[0] < 100  # the producer waited instead of queueing 10 MB


async def test_a_client_that_leaves_while_a_send_is_blocked_ends_the_run_at_once() -> None:
    stuck = anyio.Event()
    cancelled = anyio.Event()
    aborted: list[bool] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            stuck.set()
            await anyio.sleep_forever()  # the client's window is full

    async def receive() -> Message:
        await stuck.wait()  # then the client closes its connection
        return {"type": "http.disconnect"}

    async def produce(write: Write) -> None:
        with anyio.CancelScope() as scope:
            cancel_run.append(scope)
            while True:
                await write(FRAME)
                await anyio.lowlevel.checkpoint()

    cancel_run: list[anyio.CancelScope] = []

    def disconnected() -> None:  # what the transport does: cancel the turn
        cancelled.set()
        cancel_run[0].cancel()

    stream = EventStream(produce, on_disconnect=disconnected, send_timeout_s=60)
    scope = {"type": "http", "extensions": {ABORT_EXTENSION: lambda: aborted.append(True)}}
    with anyio.fail_after(10):  # far below send_timeout_s: the disconnect ended it
        await stream(scope, receive, send)
    assert cancelled.is_set() and aborted == []  # gone, not stuck: nothing to abort


async def test_a_frame_past_the_buffer_goes_out_as_it_is_and_in_order() -> None:
    sent: list[bytes] = []
    chunks = [anyio.Event() for _ in range(6)]  # chunks[n]: n + 1 chunks were sent
    go_on = anyio.Event()
    big = b"data: " + b"y" * 100_000 + b"\n\n"

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            sent.append(message["body"])
            chunks[len(sent) - 1].set()
            if len(sent) == 2:  # frames pile up while the writer's first chunk is sent
                await go_on.wait()

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError  # never reached

    async def produce(write: Write) -> None:
        await write(FRAME)  # the first frame goes out with the head
        await write(FRAME)  # the writer's first chunk
        await chunks[1].wait()
        await write(b"data: a\n\n")
        await write(big)  # behind a queued frame: copied after it
        go_on.set()
        await chunks[2].wait()  # the queue went out
        await write(big)  # finds the queue empty
        await write(b"data: b\n\n")

    stream = EventStream(produce, buffer_bytes=16 * 1024)
    with anyio.fail_after(10):
        await stream({"type": "http"}, receive, send)
    assert sent[:3] == [FRAME, FRAME, b"data: a\n\n" + big]
    assert sent[3] is big and sent[4:] == [b"data: b\n\n"]  # sent as it is, then the rest
