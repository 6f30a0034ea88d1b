"""The streaming provider base, through a provider written here the way the docstring says.

`LineProvider` speaks a small made-up wire (one JSON object per server-sent event: text,
usage, stop); it supplies only the hooks `HttpStreamProvider` asks for, and everything a
user notices — chunks then one response, reading stopping at the end event, the errors and
their remedies, retries before the first chunk, a done marker, the route's registration
with its deadlines — comes from the base. httpx.MockTransport plays the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from steerable_bridge.adapters.llm.deadlines import CallDeadlines
from steerable_bridge.adapters.llm.http_stream import (
    HttpConfig,
    HttpStreamProvider,
    Remedies,
    is_loopback,
)
from steerable_bridge.adapters.llm.retrying import RetryableError
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.ports.model import (
    FinishReason,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    TextChunk,
)
from steerable_bridge.runtime.values import Message, TextPart, Usage

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REQUEST = ModelRequest(
    model="line:m",
    system="",
    messages=(Message(id="u1", role="user", content=(TextPart(text="hi"),)),),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LineConfig(HttpConfig):
    base_url: str = "https://line.example"
    key_env: str = "LINE_KEY"


class LineDecoder:
    def __init__(self) -> None:
        self.finish_reason: FinishReason | None = None
        self.model: str | None = None
        self.usage = Usage()
        self.replaced_surrogates = 0
        self.stopped = False

    def feed(self, data: dict[str, Any]) -> list[ModelChunk]:
        kind = data["type"]
        if kind == "text":
            return [TextChunk(delta=str(data["text"]))]
        if kind == "usage":
            self.usage = Usage(prompt_tokens=int(data["in"]), completion_tokens=int(data["out"]))
            return []
        if kind == "stop":
            self.finish_reason = "max_tokens" if data.get("reason") == "length" else "end_turn"
            self.stopped = True
            return []
        raise ValueError(f"unknown event type {kind!r}")

    def flush(self) -> list[ModelChunk]:
        return []


class LineProvider(HttpStreamProvider[LineConfig, LineDecoder]):
    prefix = "line"
    path = "/v2/stream"
    remedies = Remedies(
        endpoint="check that LINE_URL points at a line server",
        unreachable="start the line server",
        slow="the line server is slow; try again",
        missing_key="set {key_env}",
        incomplete=" (no stop event); send the prompt again",
    )

    @classmethod
    def config_from_env(cls, model: str, env: Mapping[str, str] | None) -> LineConfig:
        env = env or {}
        return LineConfig(model=model, base_url=env.get("LINE_URL", "https://line.example"))

    def headers(self) -> dict[str, str]:
        return {"accept": "text/event-stream", "x-line-key": self.config.api_key or ""}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        return {"model": self.config.model, "turns": len(request.messages)}

    def decoder(self) -> LineDecoder:
        return LineDecoder()

    def ended(self, decoder: LineDecoder) -> bool:
        return decoder.stopped

    def status_error(self, reply: httpx.Response, tries: int) -> ProviderError:
        if reply.status_code == 503:
            return RetryableError("server_error", f"busy (try {tries + 1})", 0.0)
        return ProviderError("bad_request", f"refused: {reply.text}")


class MarkedProvider(LineProvider):
    """The same wire ended by a done marker line instead of a stop event."""

    done_marker = "[END]"

    def ended(self, decoder: LineDecoder) -> bool:
        return False


def sse(*events: dict[str, Any] | str) -> bytes:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return "".join(f"data: {line}\n\n" for line in lines).encode()


class Server:
    """Answers each POST with the next (status, body) and records what it was sent."""

    def __init__(self, *answers: tuple[int, bytes]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        kind = "text/event-stream" if status == 200 else "text/plain"
        return httpx.Response(status, headers={"content-type": kind}, content=body)


def line(server: Server, kind: type[LineProvider] = LineProvider, **config: Any) -> LineProvider:
    settings: dict[str, Any] = {"model": "m", "api_key": "k", "backoff_s": 0.0, **config}
    return kind(LineConfig(**settings), transport=httpx.MockTransport(server.handler))


async def collect(provider: LineProvider) -> list[ModelStreamItem]:
    try:
        return [item async for item in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


TEXT = sse(
    {"type": "text", "text": "Hé"},
    {"type": "text", "text": "llo"},
    {"type": "usage", "in": 7, "out": 2},
    {"type": "stop"},
    "after the end: never decoded",
)


async def test_chunks_then_one_response_and_reading_stops_at_the_end_event() -> None:
    server = Server((200, TEXT))
    items = await collect(line(server))
    assert items[:-1] == [TextChunk(delta="Hé"), TextChunk(delta="llo")]
    assert items[-1] == ModelResponse(
        finish_reason="end_turn", usage=Usage(prompt_tokens=7, completion_tokens=2), model="m"
    )
    (sent,) = server.requests
    assert str(sent.url) == "https://line.example/v2/stream"
    assert sent.headers["x-line-key"] == "k"
    assert json.loads(sent.content) == {"model": "m", "turns": 1}


async def test_a_stream_cut_before_its_end_event_is_incomplete() -> None:
    server = Server(
        (200, sse({"type": "text", "text": "Hé"}, {"type": "usage", "in": 1, "out": 1}))
    )
    with pytest.raises(ProviderError) as caught:
        await collect(line(server))
    assert caught.value.code == "stream_incomplete"
    assert caught.value.message == (
        "https://line.example closed the stream before the answer finished (no stop event);"
        " send the prompt again"
    )


@pytest.mark.parametrize(
    ("event", "says"),
    [("{not json", "that is not JSON"), ('{"type": "jump"}', "of an unexpected shape")],
)
async def test_what_does_not_decode_is_an_invalid_response_naming_the_endpoint(
    event: str, says: str
) -> None:
    server = Server((200, sse({"type": "text", "text": "a"}, event, {"type": "stop"})))
    with pytest.raises(ProviderError) as caught:
        await collect(line(server))
    assert caught.value.code == "invalid_response"
    assert says in caught.value.message
    assert caught.value.message.endswith("; check that LINE_URL points at a line server")


async def test_a_retryable_status_is_tried_again_with_the_providers_mapping() -> None:
    server = Server((503, b"busy"), (200, TEXT))
    items = await collect(line(server))
    assert isinstance(items[-1], ModelResponse)
    assert len(server.requests) == 2
    with pytest.raises(ProviderError) as caught:
        await collect(line(Server((400, b"no tools here"))))
    assert (caught.value.code, caught.value.message) == ("bad_request", "refused: no tools here")


async def test_a_done_marker_ends_the_answer_even_without_a_finish_reason() -> None:
    server = Server((200, sse({"type": "text", "text": "ok"}, "[END]", "{never decoded")))
    items = await collect(line(server, MarkedProvider))
    assert items[0] == TextChunk(delta="ok")
    assert isinstance(items[-1], ModelResponse) and items[-1].finish_reason == "end_turn"


async def test_a_remote_server_without_a_key_is_refused_before_any_request() -> None:
    server = Server((200, TEXT))
    provider = line(server, api_key=None)
    assert provider.info.needs_api_key_env == "LINE_KEY"
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.code == "auth_required"
    assert caught.value.message == "https://line.example needs an API key: set LINE_KEY"
    assert server.requests == []
    local = line(server, api_key=None, base_url="http://127.0.0.1:9")
    assert local.info.needs_api_key_env is None
    assert isinstance((await collect(local))[-1], ModelResponse)


def test_register_offers_the_prefix_configured_from_env_and_bounded_by_the_deadlines() -> None:
    router = ModelRouter()
    deadlines = CallDeadlines(call_s=900, idle_s=600)
    LineProvider.register(router, {"LINE_URL": "http://127.0.0.1:8"}, deadlines)
    provider = router.resolve("line:fast")
    assert isinstance(provider, LineProvider)
    assert provider.info.route == "line:fast"
    assert provider.url == "http://127.0.0.1:8/v2/stream"
    assert provider.config.deadlines == deadlines
    assert provider.config.read_timeout_s == 600  # httpx must not cut a raised idle wait
    short = LineProvider.factory(deadlines=CallDeadlines(call_s=60, idle_s=30))("m")
    assert isinstance(short, LineProvider) and short.config.read_timeout_s == 120  # kept
    config = LineConfig(model="m")
    assert config.with_deadlines(None) is config


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:11434/v1", True),
        ("http://localhost:8000", True),
        ("http://[::1]:9", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.2", False),
    ],
)
def test_loopback_urls_need_no_key(url: str, loopback: bool) -> None:
    assert is_loopback(url) is loopback
