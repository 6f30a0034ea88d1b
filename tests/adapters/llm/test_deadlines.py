"""The model call's deadlines, through httpx.MockTransport, for both HTTP providers.

Each fake body is an async generator the mock streams: SSE comments for ever, empty deltas
for ever, or real tokens at a steady pace. The deadlines are small (under a second); what is
asserted is the error code and which deadline it names, that the body was closed, and that a
retry is not made past the deadline — never the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.deadlines import CallClock, CallDeadlines, is_progress
from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.runtime.ports.model import (
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import Message, TextPart

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REQUEST = ModelRequest(
    model="openai:m",
    system="",
    messages=(Message(id="u1", role="user", content=(TextPart(text="hi"),)),),
)


class Body:
    """A streamed response body that records whether httpx closed it."""

    def __init__(self, parts: Callable[[], AsyncIterator[bytes]]) -> None:
        self.parts = parts
        self.closed = anyio.Event()
        self.calls = 0

    def stream(self) -> httpx.AsyncByteStream:
        return _Stream(self)


class _Stream(httpx.AsyncByteStream):
    """The body as httpx reads it: closed when the response is (`Response.aclose`), as a
    network body is. A bare async generator as the content would close only when
    collected, since httpx never closes a content iterator itself."""

    def __init__(self, body: Body) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self.body.parts():
            yield part

    async def aclose(self) -> None:
        self.body.closed.set()


def openai(body: Body, deadlines: CallDeadlines, **config: Any) -> OpenAICompatProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        body.calls += 1
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=body.stream()
        )

    return OpenAICompatProvider(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9", deadlines=deadlines, **config),
        transport=httpx.MockTransport(handler),
    )


async def comments_forever() -> AsyncIterator[bytes]:
    while True:
        yield b": keep-alive\n\n"
        await anyio.sleep(0.02)


def data(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def empty_deltas_forever() -> AsyncIterator[bytes]:
    yield data({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    while True:
        yield data({"choices": [{"index": 0, "delta": {"content": ""}}]})
        yield data({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}})
        await anyio.sleep(0.02)


async def collect(provider: Any) -> list[ModelStreamItem]:
    return [item async for item in provider.stream(REQUEST)]


async def test_sse_comments_for_ever_end_at_the_call_deadline_and_close_the_body() -> None:
    body = Body(comments_forever)
    provider = openai(body, CallDeadlines(call_s=0.3, idle_s=60))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
    assert "STEERABLE_MODEL_DEADLINE" in caught.value.message
    assert not caught.value.retryable
    with anyio.fail_after(5):
        await body.closed.wait()
    await provider.aclose()


async def test_empty_deltas_and_usage_chunks_do_not_count_as_tokens() -> None:
    body = Body(empty_deltas_forever)
    provider = openai(body, CallDeadlines(call_s=60, idle_s=0.3))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
    assert "STEERABLE_MODEL_IDLE_TIMEOUT" in caught.value.message
    with anyio.fail_after(5):
        await body.closed.wait()
    assert body.calls == 1  # a timed-out call is not retried


async def test_a_body_always_ready_with_empty_deltas_is_closed_at_the_idle_deadline() -> None:
    async def ready_forever() -> AsyncIterator[bytes]:
        # never waits for the network: the deadline is found passed between two reads
        yield data({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        while True:
            yield data({"choices": [{"index": 0, "delta": {"content": ""}}]})
            await anyio.lowlevel.checkpoint()

    body = Body(ready_forever)
    provider = openai(body, CallDeadlines(call_s=60, idle_s=0.3))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
    assert "STEERABLE_MODEL_IDLE_TIMEOUT" in caught.value.message
    with anyio.fail_after(5):  # the provider closed the response, as on the network
        await body.closed.wait()


async def test_steady_tokens_keep_a_call_alive_past_the_idle_deadline() -> None:
    async def tokens() -> AsyncIterator[bytes]:
        for n in range(12):
            yield data({"choices": [{"index": 0, "delta": {"content": f"w{n} "}}]})
            await anyio.sleep(0.05)
        yield data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        yield b"data: [DONE]\n\n"

    provider = openai(Body(tokens), CallDeadlines(call_s=60, idle_s=0.4))
    items = await collect(provider)
    text = "".join(i.delta for i in items if isinstance(i, TextChunk))
    assert text.startswith("w0 w1") and "w11" in text
    assert isinstance(items[-1], ModelResponse)


async def test_a_retry_is_not_made_when_its_backoff_would_pass_the_deadline() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(503, headers={"retry-after": "30"}, json={"error": "busy"})

    provider = OpenAICompatProvider(
        OpenAIConfig(
            model="m",
            base_url="http://127.0.0.1:9",
            deadlines=CallDeadlines(call_s=2, idle_s=2),
            max_backoff_s=30,
        ),
        transport=httpx.MockTransport(handler),
    )
    with anyio.fail_after(10):  # a retry would sleep 30 s
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
    assert caught.value.code == "server_error"
    assert calls == 1


async def test_anthropic_comments_for_ever_end_at_the_idle_deadline() -> None:
    async def parts() -> AsyncIterator[bytes]:
        start = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}}
        yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
        yield b'event: ping\ndata: {"type": "ping"}\n\n'
        async for comment in comments_forever():
            yield comment

    body = Body(parts)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=body.stream()
        )

    provider = AnthropicProvider(
        AnthropicConfig(
            model="c", base_url="http://127.0.0.1:9", deadlines=CallDeadlines(idle_s=0.3)
        ),
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
    assert "--model-idle-timeout" in caught.value.message
    with anyio.fail_after(5):
        await body.closed.wait()


async def test_a_server_that_never_answers_the_request_ends_at_the_deadline() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    provider = OpenAICompatProvider(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9", deadlines=CallDeadlines(call_s=0.3)),
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
    assert "STEERABLE_MODEL_DEADLINE" in caught.value.message


def test_only_non_empty_deltas_are_progress() -> None:
    assert is_progress(TextChunk(delta="a"))
    assert not is_progress(TextChunk(delta=""))
    assert is_progress(ReasoningChunk(delta="", signature="sig"))
    assert not is_progress(ReasoningChunk(delta=""))
    assert is_progress(ToolCallChunk(call_id="c", name="read_file"))
    assert not is_progress(ToolCallChunk(call_id="c"))
    assert not is_progress(ModelResponse(finish_reason="end_turn"))


def test_the_nearer_deadline_is_the_one_named() -> None:
    now = [0.0]
    clock = CallClock(CallDeadlines(call_s=10, idle_s=4), base_url="u", clock=lambda: now[0])
    now[0] = 3.0
    clock.restart_idle()  # idle now ends at 7
    now[0] = 8.0
    assert clock.remaining() == 2.0
    assert "idle" in clock.expired("idle").message
    assert "--model-deadline" in clock.expired("call").message


async def test_a_body_that_never_stops_arriving_is_still_cut_at_the_deadline() -> None:
    async def flood() -> AsyncIterator[bytes]:
        while True:  # comments as fast as they can be read, with no await of its own
            yield b": " + b"x" * 1000 + b"\n\n"

    body = Body(flood)
    provider = openai(body, CallDeadlines(call_s=0.3, idle_s=60))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "model_timeout"
