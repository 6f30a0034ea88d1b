"""Anthropic provider figures on loopback: stream throughput, time to first chunk, body cost.

A local server speaks the Messages API's streaming grammar (message_start, one text block of
`--deltas` text_delta events, message_delta, message_stop; SSE framing by sse-starlette) on
127.0.0.1. Prints (1) text chunks per second through `AnthropicProvider.stream`, (2) time to
the first chunk over `--calls` sequential calls on the provider's one pooled client (p50 /
p95), and (3) the cost of building a request body — history mapping plus the three cache
anchors — for a `--messages`-message transcript, with anchors and with caching off.

    uv run python bench/anthropic_stream.py [--deltas 20000] [--calls 50] [--messages 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import anyio
import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.cache_shaping import CachePolicy
from steerable_bridge.runtime.ports.model import ModelRequest, TextChunk, ToolSpec
from steerable_bridge.runtime.values import Message, TextPart, ToolCall


def app(deltas: int) -> Starlette:
    async def messages(request: Request) -> EventSourceResponse:
        await request.body()

        def event(kind: str, **data: Any) -> dict[str, str]:
            return {"event": kind, "data": json.dumps({"type": kind, **data})}

        async def events() -> AsyncIterator[dict[str, str]]:
            usage = {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 4000}
            message = {"id": "msg_b", "model": "bench", "role": "assistant", "usage": usage}
            yield event("message_start", message=message)
            yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            for i in range(deltas):
                yield event(
                    "content_block_delta", index=0, delta={"type": "text_delta", "text": f" w{i}"}
                )
            yield event("content_block_stop", index=0)
            yield event(
                "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": deltas}
            )
            yield event("message_stop")

        return EventSourceResponse(events(), ping=3600)

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


def serve_in_thread(deltas: int) -> tuple[str, Callable[[], None]]:
    config = uvicorn.Config(app(deltas), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark server did not start within 10 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}", stop


REQUEST = ModelRequest(
    model="anthropic:bench",
    system="You are a benchmark.",
    messages=(Message(id="u", role="user", content=(TextPart(text="go"),)),),
)


async def stream_figures(deltas: int, calls: int) -> None:
    url, stop = serve_in_thread(deltas)
    try:
        provider = AnthropicProvider(AnthropicConfig(model="bench", base_url=url))
        started = time.perf_counter()
        chunks = len([i async for i in provider.stream(REQUEST) if isinstance(i, TextChunk)])
        elapsed = time.perf_counter() - started
        print(f"stream: {chunks:,} text chunks in {elapsed:.2f} s = {chunks / elapsed:,.0f}/s")
        await provider.aclose()

        url_small, stop_small = serve_in_thread(20)
        try:
            provider = AnthropicProvider(AnthropicConfig(model="bench", base_url=url_small))
            firsts: list[float] = []
            for _ in range(calls):
                t0 = time.perf_counter()
                first: float | None = None
                async for item in provider.stream(REQUEST):
                    if first is None and isinstance(item, TextChunk):
                        first = time.perf_counter() - t0
                firsts.append(first or 0.0)
            builds = provider.http.builds
            await provider.aclose()
        finally:
            stop_small()
        firsts_ms = sorted(f * 1000 for f in firsts)
        p95 = firsts_ms[int(len(firsts_ms) * 0.95) - 1]
        print(
            f"first chunk over {calls} calls: p50 {statistics.median(firsts_ms):.2f} ms,"
            f" p95 {p95:.2f} ms, first call {firsts[0] * 1000:.2f} ms;"
            f" HTTP clients built: {builds}"
        )
    finally:
        stop()


def body_figures(messages: int) -> None:
    history: list[Message] = []
    for i in range(messages // 2):
        history.append(
            Message(
                id=f"a{i}",
                role="assistant",
                content=(TextPart(text="Reading the file. " * 20),),
                tool_calls=(ToolCall(call_id=f"c{i}", name="read_file", arguments_json="{}"),),
            )
        )
        history.append(
            Message(
                id=f"r{i}",
                role="tool",
                content=(TextPart(text="line\n" * 200),),
                tool_call_id=f"c{i}",
            )
        )
    tools = tuple(
        ToolSpec(name=f"tool{i}", description="d", parameters_json='{"type":"object"}')
        for i in range(12)
    )
    request = replace(REQUEST, messages=REQUEST.messages + tuple(history), tools=tools)
    for label, policy in (
        ("anchors on", CachePolicy()),
        ("caching off", CachePolicy(enabled=False)),
    ):
        provider = AnthropicProvider(AnthropicConfig(model="bench", cache=policy))
        rounds = 200
        started = time.perf_counter()
        for _ in range(rounds):
            provider.body(request)
        per = (time.perf_counter() - started) / rounds * 1e6
        print(f"request body, {len(request.messages)} messages, {label}: {per:,.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    anyio.run(stream_figures, args.deltas, args.calls)
    body_figures(args.messages)


if __name__ == "__main__":
    main()
