"""A local OpenAI-compatible model server that never finishes, for the model-deadline tests.

`POST /v1/chat/completions` answers 200 with an event stream whose shape depends on the
requested model name:

- `comments`: an SSE comment every 50 ms, for ever (keeps httpx's read timeout happy);
- `dribble`: one byte a second of an event that never ends;
- `stall-once`: the first request gets `comments`; every later one a short real answer.

`serve_in_thread()` runs it with uvicorn on 127.0.0.1, port 0, and returns the base URL,
the number of requests seen per model, a list of streams the server saw end (closed by the
client) and a stop function.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.prompt_server import PromptServer

ANSWER = "Here is what I have so far."


def _data(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [choice]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def app(seen: dict[str, int], closed: list[str]) -> Starlette:
    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        model = str(body.get("model"))
        seen[model] = seen.get(model, 0) + 1
        first = seen[model] == 1

        async def comments() -> AsyncIterator[bytes]:
            while True:
                yield b": still thinking\n\n"
                await anyio.sleep(0.05)

        async def dribble() -> AsyncIterator[bytes]:
            line = _data(model, {"content": "never complete"})
            for byte in line[:-2]:
                yield bytes([byte])
                await anyio.sleep(1)
            await anyio.sleep_forever()

        async def answer() -> AsyncIterator[bytes]:
            yield _data(model, {"role": "assistant", "content": ANSWER})
            yield _data(model, {}, "stop")
            yield b"data: [DONE]\n\n"

        async def events() -> AsyncIterator[bytes]:
            try:
                if model == "dribble":
                    source = dribble()
                elif model == "comments" or (model == "stall-once" and first):
                    source = comments()
                else:
                    source = answer()
                async for part in source:
                    yield part
            finally:
                closed.append(model)

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def serve_in_thread() -> tuple[str, dict[str, int], list[str], Callable[[], None]]:
    """Start the server; returns (base URL, requests per model, closed streams, stop)."""
    seen: dict[str, int] = {}
    closed: list[str] = []
    config = uvicorn.Config(app(seen, closed), host="127.0.0.1", port=0, log_level="warning")
    server = PromptServer(config)
    thread = server.start_in_thread()
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}/v1", seen, closed, stop
