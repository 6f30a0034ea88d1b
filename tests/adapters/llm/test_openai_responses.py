"""The OpenAI Responses provider against a real local server speaking the Responses stream.

The server is a Starlette app under uvicorn on 127.0.0.1, port 0: `POST /v1/responses`
records each request and answers the next canned event stream (named SSE events, as
OpenAI sends them) in odd-sized byte fragments, or an error status. What is asserted is
what a user of the route sees: text, reasoning and tool calls as chunks, the finish reason
and usage, the history sent as `input` items, and the errors with their codes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from steerable_bridge.adapters.llm.deadlines import CallDeadlines
from steerable_bridge.adapters.llm.openai_responses import (
    OpenAIResponsesProvider,
    ResponsesConfig,
    config_from_env,
)
from steerable_bridge.commands.credentials import ModelEnv
from steerable_bridge.commands.model_routes import build_router
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.ports.model import (
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)
from steerable_bridge.runtime.values import ImagePart, Message, TextPart, ToolCall, Usage
from tests.prompt_server import PromptServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TOOL = ToolSpec(
    name="read_file",
    description="Read a file",
    parameters_json='{"type":"object","properties":{"path":{"type":"string"}}}',
)
REQUEST = ModelRequest(
    model="openai-responses:codex",
    system="Be brief.",
    messages=(Message(id="u1", role="user", content=(TextPart(text="hi"),)),),
    tools=(TOOL,),
)


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


USAGE = {
    "input_tokens": 120,
    "output_tokens": 9,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens_details": {"reasoning_tokens": 4},
}
CREATED = event("response.created", response={"id": "resp_1", "model": "codex-1"})


def completed(**response: Any) -> bytes:
    return event("response.completed", response={"status": "completed", **response})


TEXT_STREAM = b"".join(
    [
        CREATED,
        event("response.output_item.added", output_index=0, item={"type": "reasoning"}),
        event("response.reasoning_summary_text.delta", delta="Thinking..."),
        event("response.output_item.added", output_index=1, item={"type": "message"}),
        event("response.output_text.delta", item_id="msg_1", delta="Héllo, "),
        event("response.output_text.delta", item_id="msg_1", delta="wörld ✓"),
        event("response.output_text.done", item_id="msg_1", text="Héllo, wörld ✓"),
        completed(usage=USAGE),
    ]
)


def call_added(item_id: str, call_id: str, arguments: str = "") -> bytes:
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": "read_file"}
    return event("response.output_item.added", item={**item, "arguments": arguments})


TOOL_STREAM = b"".join(
    [
        CREATED,
        call_added("fc_1", "call_a"),
        event("response.function_call_arguments.delta", item_id="fc_1", delta='{"pa'),
        call_added("fc_2", "call_b"),
        event("response.function_call_arguments.done", item_id="fc_2", arguments='{"path": "b"}'),
        event("response.function_call_arguments.delta", item_id="fc_1", delta='th": "a"}'),
        event("response.function_call_arguments.done", item_id="fc_1", arguments='{"path": "a"}'),
        completed(usage=USAGE),
    ]
)


@dataclass
class Recorder:
    answers: list[tuple[int, bytes]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def next(self) -> tuple[int, bytes]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def fragments(body: bytes, sizes: tuple[int, ...]) -> Iterator[bytes]:
    start, turn = 0, 0
    while start < len(body):
        size = sizes[turn % len(sizes)]
        yield body[start : start + size]
        start, turn = start + size, turn + 1


@asynccontextmanager
async def serve(rec: Recorder) -> AsyncIterator[str]:
    """A canned Responses server on 127.0.0.1:<free port>; yields its base URL."""

    async def responses(request: Request) -> Response:
        rec.requests.append(await request.json())
        rec.headers.append(dict(request.headers))
        status, body = rec.next()
        if status != 200:
            return Response(body, status_code=status, media_type="application/json")

        async def pieces() -> AsyncIterator[bytes]:
            for piece in fragments(body, (17, 5, 31)):
                await anyio.sleep(0.001)  # the pieces leave as separate writes
                yield piece

        return StreamingResponse(pieces(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])])
    server = PromptServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            server.should_exit = True


async def collect(
    rec: Recorder, request: ModelRequest = REQUEST, **config: Any
) -> list[ModelStreamItem]:
    """The items of one call; its `ProviderError` is raised outside the server's task group."""
    items: list[ModelStreamItem] = []
    failure: ProviderError | None = None
    async with serve(rec) as url:
        settings: dict[str, Any] = {"model": "codex", "base_url": url, "backoff_s": 0.0}
        provider = OpenAIResponsesProvider(ResponsesConfig(**{**settings, **config}))
        try:
            items = [item async for item in provider.stream(request)]
        except ProviderError as error:
            failure = error
        finally:
            await provider.aclose()
    if failure is not None:
        raise failure
    return items


async def test_text_and_reasoning_stream_then_one_response_with_usage() -> None:
    rec = Recorder([(200, TEXT_STREAM)])
    items = await collect(rec, api_key="sk-r")
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "Héllo, wörld ✓"
    assert [i.delta for i in items if isinstance(i, ReasoningChunk)] == ["Thinking..."]
    assert items[-1] == ModelResponse(
        finish_reason="end_turn",
        usage=Usage(prompt_tokens=120, completion_tokens=9, cached_tokens=100, reasoning_tokens=4),
        model="codex-1",
    )
    sent = rec.requests[0]
    assert (sent["model"], sent["stream"], sent["store"]) == ("codex", True, False)
    assert sent["instructions"] == "Be brief."
    assert sent["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    assert rec.headers[0]["authorization"] == "Bearer sk-r"


async def test_parallel_tool_calls_stream_by_item_and_finish_with_tool_calls() -> None:
    items = await collect(Recorder([(200, TOOL_STREAM)]))
    calls: dict[str, list[str]] = {}
    names = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            calls.setdefault(item.call_id, []).append(item.arguments_delta)
            if item.name:
                names[item.call_id] = item.name
    assert {k: "".join(v) for k, v in calls.items()} == {
        "call_a": '{"path": "a"}',  # deltas; the closing `done` repeats them and is not added
        "call_b": '{"path": "b"}',  # no deltas: the `done` event carries the arguments
    }
    assert names == {"call_a": "read_file", "call_b": "read_file"}
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == "tool_calls"


async def test_a_call_sent_only_whole_in_its_closing_item_still_arrives() -> None:
    item = {"type": "function_call", "id": "fc_9", "call_id": "call_z", "name": "read_file"}
    done = event("response.output_item.done", item={**item, "arguments": '{"path": "z"}'})
    items = await collect(Recorder([(200, CREATED + done + completed())]))
    assert [i for i in items if isinstance(i, ToolCallChunk)] == [
        ToolCallChunk(call_id="call_z", name="read_file"),
        ToolCallChunk(call_id="call_z", arguments_delta='{"path": "z"}'),
    ]
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == "tool_calls"


async def test_the_history_goes_as_input_items_calls_results_and_images() -> None:
    history = (
        Message(id="u1", role="user", content=(TextPart(text="read a"),)),
        Message(
            id="a1",
            role="assistant",
            content=(TextPart(text="Reading."),),
            tool_calls=(ToolCall(call_id="call_a", name="read_file", arguments_json='{"p":1}'),),
        ),
        Message(
            id="t1",
            role="tool",
            tool_call_id="call_a",
            content=(TextPart(text="contents"), ImagePart(data="QUJD", mime_type="image/png")),
        ),
    )
    request = ModelRequest(model="openai-responses:codex", system="", messages=history)
    rec = Recorder([(200, TEXT_STREAM)])
    await collect(rec, request)
    sent = rec.requests[0]
    assert "instructions" not in sent and "tools" not in sent
    assert sent["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read a"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading."}],
        },
        {"type": "function_call", "call_id": "call_a", "name": "read_file", "arguments": '{"p":1}'},
        {
            "type": "function_call_output",
            "call_id": "call_a",
            "output": "contents\n[image (image/png) attached below]",
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Images returned by the tool calls above:"},
                {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
            ],
        },
    ]


async def test_an_answer_cut_at_the_output_limit_finishes_with_max_tokens() -> None:
    cut = event(
        "response.incomplete",
        response={"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
    )
    stream = CREATED + event("response.output_text.delta", item_id="m", delta="Hal") + cut
    items = await collect(Recorder([(200, stream)]))
    assert items[0] == TextChunk(delta="Hal")
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == "max_tokens"


async def test_a_rate_limited_stream_is_retried_before_its_first_chunk() -> None:
    failed = event(
        "response.failed",
        response={"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
    )
    rec = Recorder([(200, CREATED + failed), (200, TEXT_STREAM)])
    items = await collect(rec)
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == "end_turn"
    assert len(rec.requests) == 2


@pytest.mark.parametrize(
    ("answer", "code", "says"),
    [
        ((404, b'{"error": {"message": "no such model"}}'), "model_not_found", "/responses"),
        (
            (400, b'{"error": {"code": "context_length_exceeded", "message": "too long"}}'),
            "context_overflow",
            "compact",
        ),
        ((200, CREATED + event("response.output_text.delta", delta="x")), "stream_incomplete", ""),
        ((200, CREATED + event("error", code="bad", message="boom")), "provider_error", "boom"),
        (
            (200, CREATED + event("response.failed", response={"error": {}})),
            "provider_error",
            "failed",
        ),
        (
            (
                200,
                CREATED + event("response.function_call_arguments.delta", item_id="x", delta="{"),
            ),
            "invalid_response",
            "without 'x'",  # arguments for a call never announced
        ),
    ],
)
async def test_failures_carry_their_code_and_remedy(
    answer: tuple[int, bytes], code: str, says: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(Recorder([answer]), max_retries=0)
    assert caught.value.code == code
    assert says in caught.value.message


def test_the_route_is_offered_by_the_cli_and_configured_like_openai(tmp_path: Any) -> None:
    env = ModelEnv(
        env={"STEERABLE_BASE_URL": "http://127.0.0.1:9/v1", "XDG_CONFIG_HOME": str(tmp_path)}
    )
    deadlines = CallDeadlines(call_s=900, idle_s=600)
    provider = build_router("openai-responses:codex", deadlines, env).resolve(
        "openai-responses:codex"
    )
    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.url == "http://127.0.0.1:9/v1/responses"
    assert provider.info.needs_api_key_env is None  # loopback: no key needed
    assert provider.config.read_timeout_s == 600
    remote = config_from_env("codex", {"OPENAI_API_KEY": "sk-o"})
    assert (remote.base_url, remote.api_key) == ("https://api.openai.com/v1", "sk-o")
    with pytest.raises(RouteError) as refused:
        config_from_env("default", {})
    assert "openai-responses:NAME" in refused.value.message
