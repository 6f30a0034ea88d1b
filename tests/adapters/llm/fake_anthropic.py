"""A fake Anthropic Messages API for tests: SSE byte streams written to the documented grammar.

`Stream` builds one streamed answer event by event (message_start, content blocks with
text / input_json / thinking / signature deltas, redacted thinking, ping, message_delta,
message_stop, error); `from_round` turns a scripted-model round into the stream the real API
would send for it. `serve(answers)` runs a Starlette app under uvicorn on 127.0.0.1 (OS-picked
port) that answers `POST /v1/messages` with the next canned answer, recording each request
body and its headers; `mock_transport(answers)` does the same through `httpx.MockTransport`,
feeding the body in odd-sized fragments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from steerable_bridge.adapters.llm.scripted import Round
from tests.prompt_server import PromptServer


def event(kind: str, data: dict[str, Any]) -> bytes:
    """One server-sent event as the API frames it: `event:` line, `data:` line, blank line."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


@dataclass
class Stream:
    """One Messages-API answer, built in stream order."""

    model: str = "claude-test-1"
    parts: list[bytes] = field(default_factory=list)
    index: int = 0
    hang: bool = False
    """Keep the connection open after the last event (until the client goes away)."""

    def start(self, *, input_tokens: int = 10, read: int = 0, created: int = 0) -> Stream:
        usage = {
            "input_tokens": input_tokens,
            "output_tokens": 1,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }
        message = {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self.parts.append(event("message_start", {"message": message}))
        return self

    def ping(self) -> Stream:
        self.parts.append(event("ping", {}))
        return self

    def _block(self, block: dict[str, Any], deltas: list[dict[str, Any]]) -> Stream:
        i = self.index
        self.parts.append(event("content_block_start", {"index": i, "content_block": block}))
        for delta in deltas:
            self.parts.append(event("content_block_delta", {"index": i, "delta": delta}))
        self.parts.append(event("content_block_stop", {"index": i}))
        self.index += 1
        return self

    def text(self, *pieces: str) -> Stream:
        return self._block(
            {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]
        )

    def tool_use(self, call_id: str, name: str, *fragments: str) -> Stream:
        return self._block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": f} for f in fragments],
        )

    def thinking(self, *pieces: str, signature: str = "sig-1") -> Stream:
        deltas: list[dict[str, Any]] = [{"type": "thinking_delta", "thinking": p} for p in pieces]
        deltas.append({"type": "signature_delta", "signature": signature})
        return self._block({"type": "thinking", "thinking": ""}, deltas)

    def redacted(self, data: str) -> Stream:
        return self._block({"type": "redacted_thinking", "data": data}, [])

    def stop(self, reason: str = "end_turn", *, output_tokens: int = 5) -> Stream:
        self.parts.append(
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": reason, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            )
        )
        self.parts.append(event("message_stop", {}))
        return self

    def error(self, error_type: str = "overloaded_error", message: str = "Overloaded") -> Stream:
        self.parts.append(event("error", {"error": {"type": error_type, "message": message}}))
        return self

    def body(self) -> bytes:
        return b"".join(self.parts)


def from_round(round_: Round, model: str = "claude-test-1") -> Stream:
    """The stream the Messages API would send for one scripted-model round."""
    usage = round_.usage
    stream = Stream(model=model, hang=round_.hang)
    stream.start(input_tokens=usage.prompt_tokens - usage.cached_tokens, read=usage.cached_tokens)
    stream.ping()
    if round_.reasoning:
        stream.thinking(*_pieces(round_.reasoning, round_.chunk_size), signature="sig-scripted")
    if round_.text:
        stream.text(*_pieces(round_.text, round_.chunk_size))
    for call in round_.tool_calls:
        text = call.arguments_text
        if text is None:
            text = json.dumps(call.arguments, separators=(",", ":"))
        stream.tool_use(call.id, call.name, *_pieces(text, round_.chunk_size))
    if round_.hang:
        return stream
    if round_.error is not None:
        kind = "rate_limit_error" if round_.error.code == "rate_limited" else "api_error"
        return stream.error(kind, round_.error.message)
    finish = round_.finish_reason or ("tool_calls" if round_.tool_calls else "end_turn")
    reason = {"tool_calls": "tool_use", "end_turn": "end_turn"}.get(finish, finish)
    return stream.stop(reason, output_tokens=usage.completion_tokens)


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def fragments(data: bytes, sizes: tuple[int, ...] = (1, 3, 7, 2, 13, 5)) -> Iterator[bytes]:
    """Split `data` into odd-sized pieces, cycling through `sizes`."""
    at, i = 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)]
        yield data[at : at + size]
        at += size
        i += 1


Answer = tuple[int, Stream | bytes, dict[str, str]]


def ok(stream: Stream) -> Answer:
    return 200, stream, {"content-type": "text/event-stream"}


def fail(status: int, error_type: str, message: str, **headers: str) -> Answer:
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return status, body.encode(), {"content-type": "application/json", **headers}


@dataclass
class Recorder:
    """What the fake server saw, and what it answers next (the last answer repeats)."""

    answers: list[Answer]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def take(self, body: bytes, headers: httpx.Headers | Any) -> Answer:
        self.requests.append(json.loads(body))
        self.headers.append({k.lower(): v for k, v in dict(headers).items()})
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def mock_transport(
    rec: Recorder, sizes: tuple[int, ...] = (1, 3, 7, 2, 13, 5)
) -> httpx.MockTransport:
    """The fake API behind `httpx.MockTransport`, the body cut into `sizes`-byte fragments."""

    async def handler(request: httpx.Request) -> httpx.Response:
        status, answer, headers = rec.take(request.content, request.headers)
        body = answer.body() if isinstance(answer, Stream) else answer

        async def pieces() -> AsyncIterator[bytes]:
            for piece in fragments(body, sizes):
                yield piece

        return httpx.Response(status, headers=headers, content=pieces())

    return httpx.MockTransport(handler)


@asynccontextmanager
async def serve(rec: Recorder, pace_s: float = 0.001) -> AsyncIterator[str]:
    """The fake API on 127.0.0.1:<free port>; yields its base URL (without /v1)."""

    async def messages(request: Request) -> Response:
        status, answer, headers = rec.take(await request.body(), request.headers)
        if not isinstance(answer, Stream):
            return Response(answer, status_code=status, headers=headers)
        stream = answer

        async def pieces() -> AsyncIterator[bytes]:
            for piece in fragments(stream.body(), (17, 5, 31)):
                await anyio.sleep(pace_s)
                yield piece
            if stream.hang:
                await anyio.sleep_forever()

        return StreamingResponse(pieces(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    server = PromptServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            server.force_exit = True
