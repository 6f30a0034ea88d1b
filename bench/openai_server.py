"""A small local OpenAI-compatible server for benchmarks: streams a fixed number of tokens.

`POST /v1/chat/completions` with `stream: true` answers with `tokens` text chunks (one
token each, " w0", " w1", ...), a final chunk with `finish_reason: "stop"` and usage, then
`[DONE]` — the shape `adapters/llm/openai_compat.py` reads. SSE framing is done by
sse-starlette (no hand-written framing). `serve_in_thread(tokens)` runs it on 127.0.0.1 on
a free port in a background thread and returns the base URL and a stop function. It is a
benchmark fixture, not a model. Run on its own (`python bench/openai_server.py --port P
--tokens N`) it serves until killed, so a benchmark can keep its CPU apart from the process
it measures.

Two options make it the small-window server of the long-session proof. `window=N` enforces
a context window as vLLM and OpenAI do: a request whose prompt (about four characters a
token, like the runtime's estimate) exceeds N tokens is answered HTTP 400
`context_length_exceeded`, and `GET /v1/models` reports `max_model_len: N`. `read=PATH`
makes it act like a coding model: when the last message is the user's and tools are
offered, it calls `read_file` on PATH; after the result, it answers in `tokens` tokens; a
request without tools (a compaction summary) gets a one-line summary. With `read_if=WORD` too,
it calls `read_file` only when the user's last message holds WORD (and answers otherwise).
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
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def prompt_tokens(body: dict[str, Any]) -> int:
    """About how many tokens a request's prompt holds (characters / 4, plus framing)."""
    chars = len(json.dumps(body.get("tools") or []))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content)
        chars += len(str(content or "")) + 16
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"]) + 16
    return chars // 4


def _last_text(messages: list[dict[str, Any]]) -> str:
    content = messages[-1].get("content") if messages else None
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def app(
    tokens: int,
    *,
    window: int | None = None,
    read: str | None = None,
    read_if: str | None = None,
) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        model = str(body.get("model", "bench"))
        prompt = prompt_tokens(body)
        if window is not None and prompt > window:
            message = (
                f"This model's maximum context length is {window} tokens. However, your"
                f" messages resulted in {prompt} tokens. Please reduce the length of the messages."
            )
            error = {"message": message, "type": "invalid_request_error",
                     "param": "messages", "code": "context_length_exceeded"}  # fmt: skip
            return JSONResponse({"error": error}, status_code=400)
        messages = body.get("messages") or []
        last = messages[-1].get("role") if messages else None

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
            finish = "stop"
            if read is not None and not body.get("tools"):
                yield chunk({"content": "Summary: the user asked for files; all were read."})
            elif (
                read is not None
                and last == "user"
                and (read_if is None or read_if in _last_text(messages))
            ):
                call = {"index": 0, "id": f"call_{len(messages)}", "type": "function",
                        "function": {"name": "read_file",
                                     "arguments": json.dumps({"path": read})}}  # fmt: skip
                yield chunk({"tool_calls": [call]})
                finish = "tool_calls"
            else:
                for i in range(tokens):
                    yield chunk({"content": f" w{i}"})
            usage = {"prompt_tokens": prompt, "completion_tokens": tokens,
                     "total_tokens": prompt + tokens}  # fmt: skip
            yield chunk({}, finish, usage=usage)
            yield "[DONE]"

        return EventSourceResponse(events(), ping=3600)

    async def models(request: Request) -> JSONResponse:
        entry: dict[str, Any] = {"id": "bench", "object": "model"}
        if window is not None:
            entry["max_model_len"] = window
        return JSONResponse({"object": "list", "data": [entry]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


def serve_in_thread(
    tokens: int,
    *,
    window: int | None = None,
    read: str | None = None,
    read_if: str | None = None,
) -> tuple[str, Callable[[], None]]:
    """Start the server on 127.0.0.1:<free port>; returns (base URL, stop)."""
    config = uvicorn.Config(
        app(tokens, window=window, read=read, read_if=read_if),
        host="127.0.0.1",
        port=0,
        log_level="warning",
    )
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
    parser.add_argument("--window", type=int, help="enforce and report this context window")
    parser.add_argument("--read", help="call read_file on this path (see the docstring)")
    parser.add_argument("--read-if", help="only when the user's last message holds this")
    args = parser.parse_args()
    served = app(args.tokens, window=args.window, read=args.read, read_if=args.read_if)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
