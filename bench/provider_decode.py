"""What each HTTP model provider costs per streamed chunk, with the network taken out.

Every provider on `adapters/llm/http_stream.py` (`openai:`, `anthropic:`,
`openai-responses:`) streams `--chunks` text deltas of its own wire from a body held in
memory (`httpx.MockTransport`), so what is timed is the provider's side alone: SSE parsing,
JSON, the wire decoder, the deadlines and the base's event loop. Prints chunks per second
for each, the best of `--rounds` calls on one provider (its one pooled client). Compare a
change against its base by running this on both checkouts under the same load.

    uv run python bench/provider_decode.py [--chunks 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.adapters.llm.openai_responses import (
    OpenAIResponsesProvider,
    ResponsesConfig,
)
from steerable_bridge.runtime.ports.model import ModelProvider, ModelRequest, TextChunk
from steerable_bridge.runtime.values import Message, TextPart

REQUEST = ModelRequest(
    model="bench:m",
    system="",
    messages=(Message(id="u", role="user", content=(TextPart(text="hi"),)),),
)


def sse(events: list[dict[str, Any]], *, named: bool, done: bool = False) -> bytes:
    lines = []
    for data in events:
        head = f"event: {data['type']}\n" if named else ""
        lines.append(f"{head}data: {json.dumps(data)}\n\n")
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def chat_body(n: int) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"type": "chunk", "model": "m", "choices": [choice]}

    events = [chunk({"content": f" w{i}"}) for i in range(n)] + [chunk({}, "stop")]
    return sse(events, named=False, done=True)


def messages_body(n: int) -> bytes:
    start = {"id": "m", "model": "m", "usage": {"input_tokens": 1}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    delta = {"type": "content_block_delta", "index": 0}
    events += [{**delta, "delta": {"type": "text_delta", "text": f" w{i}"}} for i in range(n)]
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return sse(events, named=True)


def responses_body(n: int) -> bytes:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"model": "m"}}]
    delta = {"type": "response.output_text.delta", "item_id": "msg"}
    events += [{**delta, "delta": f" w{i}"} for i in range(n)]
    events.append({"type": "response.completed", "response": {"status": "completed"}})
    return sse(events, named=True)


def transport(body: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.MockTransport(handler)


def providers(n: int) -> dict[str, Callable[[], ModelProvider]]:
    local = "http://127.0.0.1:9"
    return {
        "openai": lambda: OpenAICompatProvider(
            OpenAIConfig(model="m", base_url=f"{local}/v1"), transport=transport(chat_body(n))
        ),
        "anthropic": lambda: AnthropicProvider(
            AnthropicConfig(model="m", base_url=local), transport=transport(messages_body(n))
        ),
        "openai-responses": lambda: OpenAIResponsesProvider(
            ResponsesConfig(model="m", base_url=f"{local}/v1"),
            transport=transport(responses_body(n)),
        ),
    }


async def rate(provider: ModelProvider, n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        texts = 0
        async for item in provider.stream(REQUEST):
            texts += isinstance(item, TextChunk)
        best = min(best, time.perf_counter() - start)
        assert texts == n, f"{texts} text chunks of {n}"
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()
    return n / best


async def main(n: int, rounds: int) -> None:
    for name, build in providers(n).items():
        per_s = await rate(build(), n, rounds)
        print(f"{name}: {n:,} text chunks, best of {rounds}: {per_s:,.0f} chunks/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    anyio.run(main, options.chunks, options.rounds)
