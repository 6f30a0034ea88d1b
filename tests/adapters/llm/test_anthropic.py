"""The Anthropic provider, through httpx.MockTransport (odd fragments) and a real local server.

Streams are written to the Messages API's documented event grammar by `fake_anthropic.py`;
the mock cuts them into odd-sized byte fragments (hypothesis picks the sizes), the server is
a Starlette app under uvicorn on 127.0.0.1, port 0.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.adapters.llm.anthropic import (
    API_VERSION,
    AnthropicConfig,
    AnthropicProvider,
    config_from_env,
)
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
from steerable_bridge.runtime.values import (
    ImagePart,
    Message,
    ResourcePart,
    TextPart,
    ThinkingBlock,
    ToolCall,
)
from tests.lanes import examples
from tests.refusing_port import refusing_port

from .fake_anthropic import Recorder, Stream, fail, mock_transport, ok, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

REQUEST = ModelRequest(
    model="anthropic:claude-test",
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


def text_stream() -> Stream:
    return (
        Stream()
        .start(input_tokens=20, read=100, created=30)
        .ping()
        .text("Héllo, ", "wörld ✓")
        .stop("end_turn", output_tokens=7)
    )


def tool_stream() -> Stream:
    return (
        Stream()
        .start()
        .text("Reading.")
        .tool_use("toolu_a", "read_file", '{"pa', 'th": ', '"a.py"}')
        .tool_use("toolu_b", "read_file", "", '{"path": "b.py"}')
        .stop("tool_use")
    )


def thinking_stream() -> Stream:
    return (
        Stream()
        .start()
        .thinking("Let me ", "think.", signature="sig-abc")
        .redacted("ENCRYPTED==")
        .text("Answer.")
        .stop()
    )


def provider(rec: Recorder, sizes: tuple[int, ...] = (1, 3, 7, 2, 13, 5), **config: Any):
    settings_: dict[str, Any] = {
        "model": "claude-test",
        "base_url": "http://127.0.0.1:9",
        "backoff_s": 0.0,
        **config,
    }
    return AnthropicProvider(AnthropicConfig(**settings_), transport=mock_transport(rec, sizes))


async def collect(p: AnthropicProvider, request: ModelRequest = REQUEST) -> list[ModelStreamItem]:
    try:
        return [item async for item in p.stream(request)]
    finally:
        await p.aclose()


def text_of(items: list[ModelStreamItem]) -> str:
    return "".join(i.delta for i in items if isinstance(i, TextChunk))


def calls_of(items: list[ModelStreamItem]) -> dict[str, tuple[str | None, str]]:
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


def response_of(items: list[ModelStreamItem]) -> ModelResponse:
    assert sum(isinstance(i, ModelResponse) for i in items) == 1
    last = items[-1]
    assert isinstance(last, ModelResponse)
    return last


# -- the stream grammar, in fragments -------------------------------------------------------


async def test_text_stream_reassembles_text_usage_cache_counters_and_headers() -> None:
    rec = Recorder([ok(text_stream())])
    items = await collect(provider(rec, api_key="sk-ant-test"))
    assert text_of(items) == "Héllo, wörld ✓"
    response = response_of(items)
    assert response.finish_reason == "end_turn"
    assert response.model == "claude-test-1"
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (150, 7)  # 20 + 100 + 30 in
    assert (usage.cached_tokens, usage.cache_creation_tokens) == (100, 30)
    headers = rec.headers[0]
    assert headers["x-api-key"] == "sk-ant-test"
    assert headers["anthropic-version"] == API_VERSION
    assert "authorization" not in headers
    body = rec.requests[0]
    assert body["model"] == "claude-test" and body["stream"] is True
    assert body["max_tokens"] == 8192
    assert body["system"][0]["text"] == "Be brief."
    assert body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"][0]["text"] == "hi"
    assert body["tools"][0]["name"] == "read_file"
    assert body["tools"][0]["input_schema"]["properties"]["path"] == {"type": "string"}


async def test_fragmented_input_json_deltas_assemble_each_call() -> None:
    items = await collect(provider(Recorder([ok(tool_stream())])))
    assert text_of(items) == "Reading."
    assert calls_of(items) == {
        "toolu_a": ("read_file", '{"path": "a.py"}'),
        "toolu_b": ("read_file", '{"path": "b.py"}'),
    }
    assert response_of(items).finish_reason == "tool_calls"


async def test_thinking_is_streamed_then_sealed_and_redacted_blocks_are_kept() -> None:
    items = await collect(provider(Recorder([ok(thinking_stream())])))
    reasoning = [i for i in items if isinstance(i, ReasoningChunk)]
    assert "".join(r.delta for r in reasoning) == "Let me think."
    seals = [(r.signature, r.redacted_data) for r in reasoning if r.signature or r.redacted_data]
    assert seals == [("sig-abc", None), (None, "ENCRYPTED==")]
    assert text_of(items) == "Answer."


@settings(max_examples=examples(40), deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=8))
def test_any_fragment_boundaries_give_the_same_items(sizes: list[int]) -> None:
    import anyio

    async def run() -> None:
        stream = Stream().start(read=4).thinking("Hm ", "ok", signature="s1")
        stream.text("Ünïcode ✓ ", "text").tool_use("toolu_x", "read_file", '{"p', 'ath":"ä"}')
        stream.stop("tool_use")
        items = await collect(provider(Recorder([ok(stream)]), tuple(sizes)))
        assert text_of(items) == "Ünïcode ✓ text"
        assert calls_of(items) == {"toolu_x": ("read_file", '{"path":"ä"}')}
        assert any(isinstance(i, ReasoningChunk) and i.signature == "s1" for i in items)
        assert response_of(items).usage.cached_tokens == 4

    anyio.run(run)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
        ("something_new", "end_turn"),
    ],
)
async def test_stop_reasons_map_to_ours(theirs: str, ours: str) -> None:
    items = await collect(provider(Recorder([ok(Stream().start().text("x").stop(theirs))])))
    assert response_of(items).finish_reason == ours


# -- requests --------------------------------------------------------------------------------


async def test_history_is_sent_as_alternating_turns_with_thinking_images_and_documents() -> None:
    image = ImagePart(data="aGVsbG8=", mime_type="image/png")
    doc = ResourcePart(uri="file:///a.md", text="# A", mime_type="text/markdown")
    request = replace(
        REQUEST,
        messages=(
            Message(id="u1", role="user", content=(TextPart(text="look"), image, doc)),
            Message(
                id="a1",
                role="assistant",
                content=(TextPart(text="Reading."),),
                reasoning="Let me think.",
                thinking=(
                    ThinkingBlock(text="Let me think.", signature="sig-abc"),
                    ThinkingBlock(redacted_data="ENC"),
                ),
                tool_calls=(
                    ToolCall(call_id="c1", name="read_file", arguments_json='{"path":"a"}'),
                    ToolCall(call_id="c2", name="read_file", arguments_json='{"path":"b"}'),
                ),
            ),
            Message(id="r1", role="tool", content=(TextPart(text="A"),), tool_call_id="c1"),
            Message(
                id="r2",
                role="tool",
                content=(TextPart(text="no such file"),),
                tool_call_id="c2",
                is_error=True,
            ),
            Message(id="u2", role="user", content=(TextPart(text="and now?"),)),
        ),
    )
    rec = Recorder([ok(text_stream())])
    await collect(provider(rec, cache=_off()), request)
    user, assistant, results = rec.requests[0]["messages"]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "# A"},
                "title": "file:///a.md",
            },
        ],
    }
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"},
            {"type": "redacted_thinking", "data": "ENC"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "c2", "name": "read_file", "input": {"path": "b"}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [{"type": "text", "text": "A"}],
            },
            {
                "type": "tool_result",
                "tool_use_id": "c2",
                "content": [{"type": "text", "text": "no such file"}],
                "is_error": True,
            },
            {"type": "text", "text": "and now?"},
        ],
    }


def _off() -> Any:
    from steerable_bridge.adapters.llm.cache_shaping import CachePolicy

    return CachePolicy(enabled=False)


async def test_thinking_budget_enables_thinking_and_leaves_room_for_the_answer() -> None:
    rec = Recorder([ok(text_stream())])
    await collect(provider(rec, thinking_budget=16000, max_tokens=4096))
    body = rec.requests[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16000}
    assert body["max_tokens"] > 16000
    assert "temperature" not in body


# -- retries and errors ----------------------------------------------------------------------


async def test_overloaded_529_is_retried_then_succeeds() -> None:
    rec = Recorder([fail(529, "overloaded_error", "Overloaded"), ok(text_stream())])
    items = await collect(provider(rec))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_429_retry_after_is_honoured_within_the_bound() -> None:
    rec = Recorder([fail(429, "rate_limit_error", "slow down", **{"retry-after": "0.05"})])
    rec.answers.append(ok(text_stream()))
    p = provider(rec, backoff_s=0.0, max_backoff_s=0.05)
    items = await collect(p)
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_retries_are_bounded_and_the_error_says_how_often() -> None:
    rec = Recorder([fail(529, "overloaded_error", "Overloaded", **{"request-id": "req_1"})])
    with pytest.raises(ProviderError) as info:
        await collect(provider(rec, max_retries=2))
    assert info.value.code == "overloaded"
    assert "3 attempts" in info.value.message and "req_1" in info.value.message
    assert len(rec.requests) == 3


async def test_overloaded_error_event_before_any_content_is_retried() -> None:
    broken = Stream().start().ping().error("overloaded_error", "Overloaded")
    rec = Recorder([ok(broken), ok(text_stream())])
    items = await collect(provider(rec))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_error_event_after_content_fails_without_a_second_answer() -> None:
    broken = Stream().start().text("half")
    broken.error("overloaded_error", "Overloaded")
    rec = Recorder([ok(broken), ok(text_stream())])
    p = provider(rec)
    items: list[ModelStreamItem] = []
    with pytest.raises(ProviderError) as info:
        async for item in p.stream(REQUEST):
            items.append(item)
    await p.aclose()
    assert info.value.code == "overloaded"
    assert text_of(items) == "half"
    assert len(rec.requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "code", "remedy"),
    [
        (401, "authentication_error", "auth_failed", "ANTHROPIC_API_KEY"),
        (403, "permission_error", "permission_denied", "model access"),
        (404, "not_found_error", "model_not_found", "anthropic:NAME"),
        (400, "invalid_request_error", "bad_request", "tools, images"),
        (413, "request_too_large", "context_overflow", "compact"),
    ],
)
async def test_refusals_are_not_retried_and_name_the_remedy(
    status: int, error_type: str, code: str, remedy: str
) -> None:
    rec = Recorder([fail(status, error_type, "nope")])
    with pytest.raises(ProviderError) as info:
        await collect(provider(rec))
    assert info.value.code == code
    assert remedy in info.value.message and "nope" in info.value.message
    assert len(rec.requests) == 1


async def test_prompt_too_long_is_a_context_overflow() -> None:
    rec = Recorder([fail(400, "invalid_request_error", "prompt is too long: 210000 tokens")])
    with pytest.raises(ProviderError) as info:
        await collect(provider(rec))
    assert info.value.code == "context_overflow"


async def test_missing_key_fails_before_any_request_and_names_the_variable() -> None:
    rec = Recorder([ok(text_stream())])
    p = provider(rec, base_url="https://api.anthropic.example")
    assert p.info.needs_api_key_env == "ANTHROPIC_API_KEY"
    with pytest.raises(ProviderError) as info:
        await collect(p)
    assert info.value.code == "auth_required"
    assert "ANTHROPIC_API_KEY" in info.value.message
    assert rec.requests == []


async def test_stream_without_message_stop_is_incomplete() -> None:
    with pytest.raises(ProviderError) as info:
        await collect(provider(Recorder([ok(Stream().start().text("half"))])))
    assert info.value.code == "stream_incomplete"


async def test_a_page_that_is_not_an_event_stream_names_the_base_url() -> None:
    rec = Recorder([(200, b"<html>proxy login</html>", {"content-type": "text/html"})])
    with pytest.raises(ProviderError) as info:
        await collect(provider(rec))
    assert info.value.code == "invalid_response"
    assert "ANTHROPIC_BASE_URL" in info.value.message


# -- configuration ---------------------------------------------------------------------------


def test_config_from_env_keys_base_url_and_settings() -> None:
    config = config_from_env(
        "claude-x",
        {
            "ANTHROPIC_API_KEY": "a",
            "STEERABLE_API_KEY": "s",
            "ANTHROPIC_BASE_URL": "http://proxy:8080/v1/",
            "STEERABLE_THINKING_BUDGET": "2048",
            "STEERABLE_PROMPT_CACHE_TTL": "1h",
        },
    )
    assert (config.api_key, config.base_url, config.thinking_budget) == (
        "a",
        "http://proxy:8080",
        2048,
    )
    assert config.cache.ttl == "1h" and config.cache.enabled
    assert config_from_env("m", {"STEERABLE_API_KEY": "s"}).api_key == "s"
    default = config_from_env("m", {})
    assert default.base_url == "https://api.anthropic.com" and default.needs_key
    assert default.context_window == 200_000 and default.thinking_budget is None
    assert not config_from_env("m", {"STEERABLE_PROMPT_CACHE": "off"}).cache.enabled


@pytest.mark.parametrize(
    ("model", "env", "code"),
    [
        ("default", {}, "missing_model"),
        ("m", {"ANTHROPIC_BASE_URL": "api.anthropic.com"}, "invalid_base_url"),
        ("m", {"STEERABLE_THINKING_BUDGET": "100"}, "invalid_setting"),
        ("m", {"STEERABLE_PROMPT_CACHE_TTL": "2h"}, "invalid_setting"),
        ("m", {"STEERABLE_PROMPT_CACHE": "maybe"}, "invalid_setting"),
    ],
)
def test_bad_configuration_is_refused_at_routing(
    model: str, env: dict[str, str], code: str
) -> None:
    with pytest.raises(RouteError) as info:
        config_from_env(model, env)
    assert info.value.code == code


# -- against a real local server -------------------------------------------------------------


def live(url: str, **config: Any) -> AnthropicProvider:
    settings_: dict[str, Any] = {"model": "claude-test", "base_url": url, "backoff_s": 0.01}
    return AnthropicProvider(AnthropicConfig(**{**settings_, **config}))


async def test_live_server_streams_text_tools_and_thinking_over_one_client() -> None:
    rec = Recorder([ok(text_stream()), ok(tool_stream()), ok(thinking_stream())])
    async with serve(rec) as url:
        p = live(url)
        try:
            first = [i async for i in p.stream(REQUEST)]
            second = [i async for i in p.stream(REQUEST)]
            third = [i async for i in p.stream(REQUEST)]
            assert p.http.builds == 1  # one pooled client for every call
        finally:
            await p.aclose()
    assert text_of(first) == "Héllo, wörld ✓"
    assert response_of(first).usage.cached_tokens == 100
    assert list(calls_of(second)) == ["toolu_a", "toolu_b"]
    assert any(isinstance(i, ReasoningChunk) and i.signature == "sig-abc" for i in third)
    assert "x-api-key" not in rec.headers[0]  # loopback: no key needed, none sent
    assert rec.headers[0]["anthropic-version"] == API_VERSION


async def test_live_server_overloaded_then_success() -> None:
    rec = Recorder([fail(529, "overloaded_error", "Overloaded"), ok(text_stream())])
    async with serve(rec) as url:
        items = await collect(live(url))
    assert text_of(items) == "Héllo, wörld ✓"
    assert len(rec.requests) == 2


async def test_live_server_overloaded_error_event_exhausts_retries() -> None:
    rec = Recorder([ok(Stream().start().error("overloaded_error", "Overloaded"))])
    async with serve(rec) as url:
        with pytest.raises(ProviderError) as info:
            await collect(live(url, max_retries=1))
    assert info.value.code == "overloaded"
    assert len(rec.requests) == 2


async def test_live_server_401_names_the_key_variable() -> None:
    rec = Recorder([fail(401, "authentication_error", "invalid x-api-key")])
    async with serve(rec) as url:
        with pytest.raises(ProviderError) as info:
            await collect(live(url, api_key="sk-ant-nope"))
    assert info.value.code == "auth_failed"
    assert "set ANTHROPIC_API_KEY" in info.value.message
    assert rec.headers[0]["x-api-key"] == "sk-ant-nope"


async def test_connection_refused_names_the_base_url_variable() -> None:
    with refusing_port() as port, pytest.raises(ProviderError) as info:
        await collect(live(f"http://127.0.0.1:{port}"))
    assert info.value.code == "connection_failed"
    assert "connection refused" in info.value.message
    assert "ANTHROPIC_BASE_URL" in info.value.message


def test_requests_are_json_serialisable_with_anchors() -> None:
    body = AnthropicProvider(AnthropicConfig(model="m")).body(REQUEST)
    json.dumps(body)
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
