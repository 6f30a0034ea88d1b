"""`sse_batches` reads the events `httpx_sse`'s `aiter_sse` reads, however the body is cut."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest
from httpx_sse import EventSource

from steerable_bridge.transports.agui.bridge.sse import sse_batches

pytestmark = pytest.mark.anyio

BODY = (
    ": keep-alive\n\n"
    'data: {"type":"RUN_STARTED"}\n\n'
    "event: message\r\nid: 7\r\ndata: first\r\ndata: second\r\n\r\n"
    "retry: 100\n\n"
    'data: {"text":"héllo ✓"}\r\r'
    "data: unterminated"
).encode()


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _response(chunks: list[bytes], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream", **(headers or {})},
        stream=_Chunks(chunks),
        request=httpx.Request("POST", "http://127.0.0.1/agent"),
    )


async def _expected(chunks: list[bytes]) -> list[str]:
    source = EventSource(_response(chunks))
    return [sse.data async for sse in source.aiter_sse() if sse.data]


async def _read(response: httpx.Response) -> list[str]:
    return [data async for batch in sse_batches(response) for data in batch]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(BODY)])
async def test_every_cut_of_the_body_reads_as_aiter_sse_reads_it(size: int) -> None:
    chunks = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    got = await _read(_response(chunks))
    assert got == await _expected(chunks)
    assert got == ['{"type":"RUN_STARTED"}', "first\nsecond", '{"text":"héllo ✓"}']


async def test_a_network_read_holding_several_events_is_one_batch() -> None:
    batches = [b async for b in sse_batches(_response([b"data: 1\n\ndata: 2\n\ndata: 3"]))]
    assert batches == [["1", "2"]]  # the third never ended: dropped, as the SSE spec says


async def test_a_compressed_body_is_decompressed() -> None:
    response = _response([gzip.compress(BODY)], {"content-encoding": "gzip"})
    assert await _read(response) == await _expected([BODY])


async def test_a_body_already_read_into_memory_is_read_too() -> None:
    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=b"data: x\n\n"
    )
    assert await _read(response) == ["x"]
