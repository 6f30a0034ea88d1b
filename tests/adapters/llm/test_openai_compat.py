"""The OpenAI-compatible provider, through httpx.MockTransport and a real local server.

The mock feeds the SSE body in odd-sized byte fragments (splitting JSON and multi-byte UTF-8
mid-character); the server is a Starlette app under uvicorn on 127.0.0.1, port 0, streaming
canned Chat Completions chunks as OpenAI, Ollama and vLLM send them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from steerable_bridge.adapters.llm.openai_compat import (
    OpenAICompatProvider,
    OpenAIConfig,
    config_from_env,
    register,
)
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter, RouteError
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
from steerable_bridge.runtime.values import ImagePart, Message, TextPart, ToolCall
from tests.prompt_server import PromptServer
from tests.refusing_port import refusing_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REQUEST = ModelRequest(
    model="openai:test-model",
    system="Be brief.",
    messages=(Message(id="u1", role="user", content=(TextPart(text="hi"),)),),
    tools=(
        ToolSpec(
            name="read_file",
            description="Read a file",
            parameters_json='{"type":"object","properties":{"path":{"type":"string"}}}',
        ),
    ),
)


# -- canned streams -------------------------------------------------------------------------


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m-1"}
    data["choices"] = (
        [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    )
    if usage is not None:
        data["usage"] = usage
    return data


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def call_fragment(index: int, *, id: str | None = None, name: str | None = None, args: str = ""):
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    fragment: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    return chunk({"tool_calls": [fragment]})


USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "prompt_tokens_details": {"cached_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 3},
}

TEXT_STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Héllo, "}),
    chunk({"content": "wörld ✓"}),
    chunk(finish="stop"),
    chunk(usage=USAGE, choices=False),
)

TOOL_STREAM = sse(
    chunk({"role": "assistant", "content": "Reading."}),
    call_fragment(0, id="call_a", name="read_file", args=""),
    call_fragment(0, args='{"pa'),
    call_fragment(1, id="call_b", name="read_file", args='{"path"'),
    call_fragment(0, args='th": "a.py"}'),
    call_fragment(1, args=': "b.py"}'),
    chunk(finish="tool_calls"),
)

INDEX_ZERO_STREAM = sse(  # Ollama / vLLM style: parallel calls all at index 0, new ids
    call_fragment(0, id="call_1", name="read_file", args='{"path": '),
    call_fragment(0, args='"x.py"}'),
    call_fragment(0, id="call_2", name="read_file", args='{"path": "y.py"}'),
    chunk(finish="tool_calls"),
)

REASONING_STREAM = sse(
    chunk({"reasoning_content": "Think"}),
    chunk({"reasoning_content": "ing..."}),
    chunk({"content": "Answer."}),
    chunk(finish="stop", usage=USAGE),
)


def fragments(data: bytes, sizes: tuple[int, ...] = (1, 3, 7, 2, 13, 5)) -> Iterator[bytes]:
    """Split `data` into odd-sized pieces, cycling through `sizes`."""
    at, i = 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)]
        yield data[at : at + size]
        at += size
        i += 1


# -- helpers --------------------------------------------------------------------------------


@dataclass
class Recorder:
    """What a fake server saw and what it answers next."""

    answers: list[tuple[int, bytes, dict[str, str]]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[Any] = field(default_factory=list)
    """The client address of each request (the same address: the connection was reused)."""

    def next(self) -> tuple[int, bytes, dict[str, str]]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def ok(body: bytes) -> tuple[int, bytes, dict[str, str]]:
    return 200, body, {"content-type": "text/event-stream"}


def fail(status: int, message: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    body = json.dumps({"error": {"message": message, "type": "x"}}).encode()
    return status, body, {"content-type": "application/json", **headers}


def mock_provider(rec: Recorder, **config: Any) -> OpenAICompatProvider:
    async def handler(request: httpx.Request) -> httpx.Response:
        rec.requests.append(json.loads(request.content))
        rec.headers.append(dict(request.headers))
        status, body, headers = rec.next()

        async def pieces() -> AsyncIterator[bytes]:
            for piece in fragments(body):
                yield piece

        return httpx.Response(status, headers=headers, content=pieces())

    settings: dict[str, Any] = {
        "model": "test-model",
        "base_url": "http://127.0.0.1:9/v1",
        "backoff_s": 0.0,
        **config,
    }
    return OpenAICompatProvider(OpenAIConfig(**settings), transport=httpx.MockTransport(handler))


async def collect(
    provider: OpenAICompatProvider, request: ModelRequest = REQUEST
) -> list[ModelStreamItem]:
    return [item async for item in provider.stream(request)]


def text_of(items: list[ModelStreamItem]) -> str:
    return "".join(i.delta for i in items if isinstance(i, TextChunk))


def calls_of(items: list[ModelStreamItem]) -> dict[str, tuple[str | None, str]]:
    """call_id → (name from the first chunk, joined arguments); checks names come first."""
    calls: dict[str, tuple[str | None, str]] = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            if item.call_id not in calls:
                assert item.name, f"first chunk of {item.call_id} lacks the name"
                calls[item.call_id] = (item.name, item.arguments_delta)
            else:
                assert item.name is None
                name, args = calls[item.call_id]
                calls[item.call_id] = (name, args + item.arguments_delta)
    return calls


# -- through httpx.MockTransport, in odd fragments ------------------------------------------


async def test_text_stream_in_fragments_reassembles_text_usage_and_finish() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    items = await collect(mock_provider(rec, api_key="sk-test"))
    assert text_of(items) == "Héllo, wörld ✓"
    response = items[-1]
    assert isinstance(response, ModelResponse)
    assert sum(isinstance(i, ModelResponse) for i in items) == 1
    assert response.finish_reason == "end_turn"
    assert response.usage.prompt_tokens == 120
    assert response.usage.completion_tokens == 7
    assert response.usage.cached_tokens == 100
    assert response.usage.reasoning_tokens == 3
    assert response.model == "m-1"
    body = rec.requests[0]
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1] == {"role": "user", "content": "hi"}
    assert body["tools"][0]["function"]["name"] == "read_file"
    assert body["tools"][0]["function"]["parameters"]["properties"]["path"] == {"type": "string"}
    assert rec.headers[0]["authorization"] == "Bearer sk-test"


async def test_fragmented_tool_calls_accumulate_by_index() -> None:
    items = await collect(mock_provider(Recorder([ok(TOOL_STREAM)])))
    assert text_of(items) == "Reading."
    calls = calls_of(items)
    assert list(calls) == ["call_a", "call_b"]
    assert calls["call_a"] == ("read_file", '{"path": "a.py"}')
    assert calls["call_b"] == ("read_file", '{"path": "b.py"}')
    response = items[-1]
    assert isinstance(response, ModelResponse) and response.finish_reason == "tool_calls"


async def test_parallel_calls_reusing_index_zero_get_their_own_ids() -> None:
    items = await collect(mock_provider(Recorder([ok(INDEX_ZERO_STREAM)])))
    calls = calls_of(items)
    assert calls == {
        "call_1": ("read_file", '{"path": "x.py"}'),
        "call_2": ("read_file", '{"path": "y.py"}'),
    }


async def test_call_without_id_gets_a_stable_synthetic_one_and_name_comes_first() -> None:
    stream = sse(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "read_file"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "z"}'}}]}),
        chunk(finish="tool_calls"),
    )
    items = await collect(mock_provider(Recorder([ok(stream)])))
    calls = calls_of(items)
    assert len(calls) == 1
    ((call_id, (name, args)),) = calls.items()
    assert call_id and name == "read_file" and args == '{"path": "z"}'


async def test_reasoning_content_becomes_reasoning_chunks() -> None:
    items = await collect(mock_provider(Recorder([ok(REASONING_STREAM)])))
    reasoning = [i.delta for i in items if isinstance(i, ReasoningChunk)]
    assert "".join(reasoning) == "Thinking..."
    first_text = next(n for n, i in enumerate(items) if isinstance(i, TextChunk))
    assert all(isinstance(i, ReasoningChunk) for i in items[:first_text])
    assert text_of(items) == "Answer."


@pytest.mark.parametrize(
    ("openai_reason", "ours"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_calls"),
        ("content_filter", "refusal"),
    ],
)
async def test_finish_reasons_map_to_stop_reasons(openai_reason: str, ours: str) -> None:
    stream = sse(chunk({"content": "x"}), chunk(finish=openai_reason))
    items = await collect(mock_provider(Recorder([ok(stream)])))
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == ours


async def test_history_is_sent_as_openai_messages() -> None:
    image = ImagePart(data="aGVsbG8=", mime_type="image/png")
    request = replace(
        REQUEST,
        messages=(
            Message(id="u1", role="user", content=(TextPart(text="look"), image)),
            Message(
                id="a1",
                role="assistant",
                content=(TextPart(text="Reading."),),
                tool_calls=(ToolCall(call_id="c1", name="read_file", arguments_json='{"p":1}'),),
            ),
            Message(
                id="r1",
                role="tool",
                content=(TextPart(text="file text"),),
                tool_call_id="c1",
            ),
        ),
    )
    rec = Recorder([ok(TEXT_STREAM)])
    await collect(mock_provider(rec), request)
    system, user, assistant, tool = rec.requests[0]["messages"]
    assert system["role"] == "system"
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
        ],
    }
    assert assistant == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"p":1}'},
            }
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "file text"}

    rec = Recorder([ok(TEXT_STREAM)])
    await collect(mock_provider(rec, accepts_images=False), request)
    user = rec.requests[0]["messages"][1]
    assert isinstance(user["content"], str)
    assert "image" in user["content"] and "aGVsbG8" not in user["content"]


async def test_429_is_retried_then_succeeds() -> None:
    rec = Recorder([fail(429, "slow down", **{"retry-after": "0"}), ok(TEXT_STREAM)])
    items = await collect(mock_provider(rec))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_500_retries_are_bounded_and_the_error_names_the_server() -> None:
    rec = Recorder([fail(500, "boom")])
    with pytest.raises(ProviderError) as info:
        await collect(mock_provider(rec, max_retries=2))
    assert info.value.code == "server_error"
    assert "HTTP 500" in info.value.message and "boom" in info.value.message
    assert "3 attempts" in info.value.message
    assert len(rec.requests) == 3


async def test_401_is_not_retried_and_names_the_key_variable() -> None:
    rec = Recorder([fail(401, "Incorrect API key provided")])
    with pytest.raises(ProviderError) as info:
        await collect(mock_provider(rec, api_key="sk-wrong"))
    assert info.value.code == "auth_failed"
    assert "STEERABLE_API_KEY" in info.value.message
    assert len(rec.requests) == 1


async def test_missing_key_for_a_remote_server_fails_before_any_request() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    provider = mock_provider(rec, base_url="https://api.example.com/v1")
    assert provider.info.needs_api_key_env == "STEERABLE_API_KEY"
    with pytest.raises(ProviderError) as info:
        await collect(provider)
    assert info.value.code == "auth_required"
    assert "STEERABLE_API_KEY" in info.value.message
    assert rec.requests == []
    assert mock_provider(rec).info.needs_api_key_env is None  # loopback needs no key


async def test_stream_cut_before_the_finish_is_an_error_not_an_answer() -> None:
    stream = sse(chunk({"content": "half an ans"}), done=False)
    with pytest.raises(ProviderError) as info:
        await collect(mock_provider(Recorder([ok(stream)])))
    assert info.value.code == "stream_incomplete"


async def test_error_object_in_the_stream_becomes_a_provider_error() -> None:
    stream = sse(chunk({"content": "a"}), {"error": {"message": "model overloaded"}})
    with pytest.raises(ProviderError) as info:
        await collect(mock_provider(Recorder([ok(stream)])))
    assert info.value.code == "provider_error"
    assert "model overloaded" in info.value.message


async def test_html_instead_of_an_event_stream_names_the_base_url_remedy() -> None:
    rec = Recorder([(200, b"<html>hello</html>", {"content-type": "text/html"})])
    with pytest.raises(ProviderError) as info:
        await collect(mock_provider(rec))
    assert info.value.code == "invalid_response"
    assert "STEERABLE_BASE_URL" in info.value.message


# -- configuration --------------------------------------------------------------------------


def test_config_from_env_fallbacks_and_settings() -> None:
    config = config_from_env("gpt-x", {"OPENAI_BASE_URL": "http://h:1/v1/", "OPENAI_API_KEY": "k"})
    assert (config.base_url, config.api_key, config.accepts_images) == ("http://h:1/v1", "k", True)
    config = config_from_env(
        "llama",
        {
            "STEERABLE_BASE_URL": "http://127.0.0.1:11434/v1",
            "OPENAI_BASE_URL": "http://ignored/v1",
            "STEERABLE_MODEL_IMAGES": "0",
            "STEERABLE_CONTEXT_WINDOW": "32768",
        },
    )
    assert config.base_url == "http://127.0.0.1:11434/v1"
    assert not config.needs_key
    provider = OpenAICompatProvider(config)
    assert provider.info.accepts_images is False
    assert provider.info.context_window == 32768
    assert provider.info.route == "openai:llama"
    assert config_from_env("m", {}).base_url == "https://api.openai.com/v1"
    assert config_from_env("m", {}).needs_key


@pytest.mark.parametrize(
    ("model", "env", "code"),
    [
        ("default", {}, "missing_model"),
        ("m", {"STEERABLE_BASE_URL": "localhost:11434"}, "invalid_base_url"),
        ("m", {"STEERABLE_CONTEXT_WINDOW": "lots"}, "invalid_setting"),
        ("m", {"STEERABLE_MODEL_IMAGES": "maybe"}, "invalid_setting"),
    ],
)
def test_bad_configuration_is_refused_at_routing(
    model: str, env: dict[str, str], code: str
) -> None:
    with pytest.raises(RouteError) as info:
        config_from_env(model, env)
    assert info.value.code == code


def test_register_adds_the_openai_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEERABLE_BASE_URL", "http://127.0.0.1:11434/v1")
    router = ModelRouter()
    register(router)
    provider = router.resolve("openai:qwen3")
    assert provider.info.route == "openai:qwen3"
    with pytest.raises(RouteError):
        router.resolve("openai")


# -- against a real local server ------------------------------------------------------------


@asynccontextmanager
async def serve(rec: Recorder, pace_s: float = 0.002) -> AsyncIterator[str]:
    """A canned Chat Completions server on 127.0.0.1:<free port>; yields its base URL."""

    async def completions(request: Request) -> Response:
        rec.requests.append(await request.json())
        rec.headers.append(dict(request.headers))
        rec.peers.append(request.client)
        status, body, headers = rec.next()
        if status != 200:
            return Response(body, status_code=status, headers=headers)

        async def pieces() -> AsyncIterator[bytes]:
            for piece in fragments(body, (17, 5, 31)):
                await anyio.sleep(pace_s)
                yield piece

        return StreamingResponse(pieces(), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"data": []})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
        ]
    )
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


def live(base_url: str, **config: Any) -> OpenAICompatProvider:
    settings: dict[str, Any] = {"model": "test-model", "base_url": base_url, "backoff_s": 0.01}
    return OpenAICompatProvider(OpenAIConfig(**{**settings, **config}))


async def test_live_server_streams_text_and_usage() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    async with serve(rec) as url:
        items = await collect(live(url))
    assert text_of(items) == "Héllo, wörld ✓"
    assert isinstance(items[-1], ModelResponse)
    assert items[-1].usage.cached_tokens == 100
    assert rec.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}
    assert "authorization" not in rec.headers[0]  # loopback: no key needed, none sent


async def test_live_server_streams_tool_calls_and_reasoning() -> None:
    rec = Recorder([ok(TOOL_STREAM), ok(INDEX_ZERO_STREAM), ok(REASONING_STREAM)])
    async with serve(rec) as url:
        provider = live(url)
        first = await collect(provider)
        second = await collect(provider)
        third = await collect(provider)
    assert calls_of(first) == {
        "call_a": ("read_file", '{"path": "a.py"}'),
        "call_b": ("read_file", '{"path": "b.py"}'),
    }
    assert list(calls_of(second)) == ["call_1", "call_2"]
    assert "".join(i.delta for i in third if isinstance(i, ReasoningChunk)) == "Thinking..."
    assert isinstance(third[-1], ModelResponse) and third[-1].usage.prompt_tokens == 120


async def test_one_provider_keeps_one_client_and_connection_across_calls() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    async with serve(rec) as url:
        provider = live(url)
        for _ in range(3):
            assert text_of(await collect(provider)) == "Héllo, wörld ✓"
        client = await provider.http.client()
        await provider.aclose()
        assert client.is_closed
    assert provider.http.builds == 1
    assert len(rec.peers) == 3 and len(set(rec.peers)) == 1  # one keep-alive connection


async def test_a_closed_provider_builds_a_new_client_on_next_use() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    provider = mock_provider(rec)
    await collect(provider)
    await provider.aclose()
    assert text_of(await collect(provider)) == "Héllo, wörld ✓"
    assert provider.http.builds == 2
    await provider.aclose()


def test_a_client_is_not_reused_across_event_loops() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    provider = mock_provider(rec)
    for _ in range(2):
        assert text_of(anyio.run(collect, provider)) == "Héllo, wörld ✓"
    assert provider.http.builds == 2


async def test_router_keeps_one_openai_provider_per_route_and_closes_it() -> None:
    router = ModelRouter()
    register(router)
    first = router.resolve("openai:qwen3")
    assert router.resolve("openai:qwen3") is first
    assert router.resolve("openai:other") is not first
    assert isinstance(first, OpenAICompatProvider)
    client = await first.http.client()
    await router.aclose()
    assert client.is_closed
    assert router.resolve("openai:qwen3") is not first  # closed providers are forgotten


async def test_live_server_429_then_success() -> None:
    rec = Recorder([fail(429, "rate limit"), ok(TEXT_STREAM)])
    async with serve(rec) as url:
        items = await collect(live(url))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_live_server_500_exhausts_retries() -> None:
    rec = Recorder([fail(503, "overloaded")])
    async with serve(rec) as url:
        with pytest.raises(ProviderError) as info:
            await collect(live(url, max_retries=1))
    assert info.value.code == "server_error"
    assert "HTTP 503" in info.value.message
    assert len(rec.requests) == 2


async def test_live_server_401_names_the_remedy() -> None:
    rec = Recorder([fail(401, "bad key")])
    async with serve(rec) as url:
        with pytest.raises(ProviderError) as info:
            await collect(live(url, api_key="sk-nope"))
    assert info.value.code == "auth_failed"
    assert "set STEERABLE_API_KEY" in info.value.message
    assert rec.headers[0]["authorization"] == "Bearer sk-nope"


async def test_connection_refused_says_to_start_the_server() -> None:
    with refusing_port() as port, pytest.raises(ProviderError) as info:
        url = f"http://127.0.0.1:{port}/v1"
        await collect(live(url))
    assert info.value.code == "connection_failed"
    assert info.value.message == (
        f"could not reach {url}: connection refused — start the model server or set"
        " STEERABLE_BASE_URL"
    )


async def test_read_timeout_is_bounded() -> None:
    rec = Recorder([ok(TEXT_STREAM)])
    async with serve(rec, pace_s=1.0) as url:
        with anyio.fail_after(10), pytest.raises(ProviderError) as info:
            await collect(live(url, read_timeout_s=0.2, max_retries=0))
    assert info.value.code == "read_timeout"


async def test_run_command_answers_from_a_local_server() -> None:
    """`steerable-bridge run --model openai:NAME` against a loopback server, no key set."""
    rec = Recorder([ok(TEXT_STREAM)])
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    async with serve(rec) as url:
        env["STEERABLE_BASE_URL"] = url
        with anyio.fail_after(20):
            done = await anyio.run_process(
                [
                    sys.executable,
                    "-m",
                    "steerable_bridge.cli",
                    "run",
                    "--model",
                    "openai:qwen",
                    "hi",
                ],
                env=env,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "Héllo, wörld ✓"
    assert rec.requests[0]["model"] == "qwen"
    assert rec.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}


async def test_a_turn_through_the_loop_sends_tool_results_back_in_openai_form() -> None:
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult

    from ...runtime.harness import assert_well_formed, make_agent, of, prompt

    async def read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=(TextPart(text=f"contents of {args['path']}"),))

    tool = Tool(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        kind="read",
        handler=read_file,
    )
    rec = Recorder([ok(TOOL_STREAM), ok(TEXT_STREAM)])
    agent = make_agent(mock_provider(rec, context_window=8192), tools=[tool])  # no probes
    session = await agent.new_session("/work")
    outcome, seen = await prompt(session, "read both")
    assert outcome.stop_reason == "end_turn"
    assert outcome.usage.cached_tokens == 100
    ends = of(seen, ev.ToolCallEnd)
    assert [(e.call_id, e.arguments_json) for e in ends] == [
        ("call_a", '{"path": "a.py"}'),
        ("call_b", '{"path": "b.py"}'),
    ]
    assert_well_formed(seen)
    messages = rec.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert messages[2]["content"] == "Reading."
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[3:]] == [
        ("call_a", "contents of a.py"),
        ("call_b", "contents of b.py"),
    ]


async def test_a_connection_dropped_before_any_chunk_is_retried() -> None:
    attempts: list[int] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) == 1:
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=TEXT_STREAM
        )

    config = OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", backoff_s=0)
    items = await collect(OpenAICompatProvider(config, transport=httpx.MockTransport(handler)))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(attempts) == 2


async def test_a_connection_dropped_mid_answer_is_not_retried() -> None:
    attempts: list[int] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)

        async def body() -> AsyncIterator[bytes]:
            yield sse(chunk({"content": "half"}), done=False)
            raise httpx.ReadError("connection reset by peer")

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    config = OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", backoff_s=0)
    seen: list[ModelStreamItem] = []
    with pytest.raises(ProviderError) as info:
        async for item in OpenAICompatProvider(
            config, transport=httpx.MockTransport(handler)
        ).stream(REQUEST):
            seen.append(item)
    assert info.value.code == "connection_lost"
    assert "send the prompt again" in info.value.message
    assert text_of(seen) == "half"  # the text already shown is not repeated by a retry
    assert len(attempts) == 1


async def test_cancelling_a_turn_stops_a_live_stream_promptly() -> None:
    from steerable_bridge.runtime import events as ev

    from ...runtime.harness import assert_well_formed, make_agent, prompt

    slow = sse(*[chunk({"content": f"w{i} "}) for i in range(200)], chunk(finish="stop"))
    rec = Recorder([ok(slow)])
    async with serve(rec, pace_s=0.05) as url:
        agent = make_agent(live(url))
        session = await agent.new_session("/work")
        result: list[Any] = []

        def cancel_on_text(event: ev.LoopEvent) -> None:
            if isinstance(event, ev.TextDelta):
                session.cancel()

        with anyio.fail_after(5):
            result.append(await prompt(session, on_event=cancel_on_text))
    outcome, seen = result[0]
    assert outcome.stop_reason == "cancelled"
    assert len([e for e in seen if isinstance(e, ev.TextDelta)]) < 5
    assert_well_formed(seen)


async def test_images_from_tools_follow_the_tool_messages_as_a_user_message() -> None:
    image = ImagePart(data="aW1n", mime_type="image/jpeg")
    calls = (
        ToolCall(call_id="c1", name="shot", arguments_json="{}"),
        ToolCall(call_id="c2", name="shot", arguments_json="{}"),
    )
    request = replace(
        REQUEST,
        messages=(
            Message(id="a1", role="assistant", tool_calls=calls),
            Message(
                id="r1",
                role="tool",
                content=(TextPart(text="shot 1"), image),
                tool_call_id="c1",
            ),
            Message(id="r2", role="tool", content=(TextPart(text="no image"),), tool_call_id="c2"),
            Message(id="u2", role="user", content=(TextPart(text="what do you see?"),)),
        ),
    )
    rec = Recorder([ok(TEXT_STREAM)])
    await collect(mock_provider(rec), request)
    messages = rec.requests[0]["messages"][1:]
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "user", "user"]
    assert messages[1]["content"] == "shot 1\n[image (image/jpeg) attached below]"
    assert messages[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,aW1n"},
    }
    assert messages[4]["content"] == "what do you see?"

    rec = Recorder([ok(TEXT_STREAM)])
    await collect(mock_provider(rec, accepts_images=False), request)
    roles = [m["role"] for m in rec.requests[0]["messages"][1:]]
    assert roles == ["assistant", "tool", "tool", "user"]
    assert "aW1n" not in json.dumps(rec.requests[0])
