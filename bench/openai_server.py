"""A small local OpenAI-compatible server for benchmarks: streams a fixed number of tokens.

`POST /v1/chat/completions` with `stream: true` answers with `tokens` text chunks (one
token each, " w0", " w1", ...), a final chunk with `finish_reason: "stop"` and usage, then
`[DONE]` — the shape `adapters/llm/openai_compat.py` reads. SSE framing is done by
sse-starlette (no hand-written framing). `serve_in_thread(tokens)` runs it on 127.0.0.1 on
a free port in a background thread and returns the base URL and a stop function. It is a
benchmark fixture, not a model: it ignores the request's content. Run on its own
(`python bench/openai_server.py --port P --tokens N`) it serves until killed, so a benchmark
can keep its CPU apart from the process it measures.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route


def app(tokens: int) -> Starlette:
    async def completions(request: Request) -> EventSourceResponse:
        body = await request.json()
        model = str(body.get("model", "bench"))

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            return json.dumps(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    **extra,
                }
            )

        async def events() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for i in range(tokens):
                yield chunk({"content": f" w{i}"})
            usage = {"prompt_tokens": 50, "completion_tokens": tokens, "total_tokens": 50 + tokens}
            yield chunk({}, "stop", usage=usage)
            yield "[DONE]"

        return EventSourceResponse(events(), ping=3600)

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def serve_in_thread(tokens: int) -> tuple[str, Callable[[], None]]:
    """Start the server on 127.0.0.1:<free port>; returns (base URL, stop)."""
    config = uvicorn.Config(app(tokens), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark model server did not start within 10 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}/v1", stop


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="serve the benchmark model on 127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args()
    uvicorn.run(app(args.tokens), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
