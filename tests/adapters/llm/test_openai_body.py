"""The request body sent to an OpenAI-compatible server is the body of the whole request,
however much of it the provider kept encoded from the requests before."""

from __future__ import annotations

import json

import httpx
import pytest

from steerable_bridge.adapters.llm import openai_body
from steerable_bridge.adapters.llm.openai_body import BodyEncoder
from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.adapters.llm.openai_wire import request_body
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import ImagePart, Message, TextPart, ToolCall

pytestmark = pytest.mark.anyio

TOOLS = (ToolSpec(name="read_file", description="read", parameters_json='{"type":"object"}'),)


def history(turns: int) -> tuple[Message, ...]:
    out: list[Message] = []
    for t in range(turns):
        out.append(Message(id=f"u{t}", role="user", content=(TextPart(text=f"turn {t} — ü"),)))
        call = ToolCall(call_id=f"c{t}", name="read_file", arguments_json='{"path":"a"}')
        out.append(Message(id=f"a{t}", role="assistant", tool_calls=(call,)))
        image = ImagePart(data="AAAA", mime_type="image/png")
        out.append(
            Message(
                id=f"r{t}",
                role="tool",
                content=(TextPart(text="x" * t), image),
                tool_call_id=f"c{t}",
            )
        )
        out.append(Message(id=f"b{t}", role="assistant", content=(TextPart(text="done"),)))
    return tuple(out)


@pytest.mark.parametrize("accepts_images", [True, False])
def test_each_body_equals_the_whole_request_encoded(accepts_images: bool) -> None:
    encoder = BodyEncoder(model="m", accepts_images=accepts_images)
    messages = history(6)
    requests = [
        ModelRequest(model="x", system="sys", messages=messages[:n], tools=TOOLS)
        for n in range(0, len(messages) + 1, 3)
    ]
    requests.append(ModelRequest(model="x", system="", messages=messages[-5:], max_tokens=9))
    rewritten = tuple(
        Message(id=m.id, role=m.role, content=(TextPart(text="new"),)) for m in messages[:2]
    )
    requests.append(ModelRequest(model="x", system="s", messages=rewritten, temperature=0.5))
    for request in requests:
        expected = request_body(request, model="m", accepts_images=accepts_images)
        assert json.loads(encoder.encode(request)) == expected
        assert list(json.loads(encoder.encode(request))) == list(expected)  # same key order


def test_the_encoder_keeps_at_most_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_body, "MAX_MESSAGES", 4)
    encoder = BodyEncoder(model="m", accepts_images=False)
    messages = history(5)
    for n in range(len(messages) + 1):
        request = ModelRequest(model="x", system="", messages=messages[:n])
        body = json.loads(encoder.encode(request))
        assert body == request_body(request, model="m", accepts_images=False)
    assert len(encoder._known) == 4


async def test_the_provider_posts_the_encoded_body_as_json() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        text = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    config = OpenAIConfig(model="m", base_url="http://127.0.0.1:1/v1")
    provider = OpenAICompatProvider(config, transport=httpx.MockTransport(handle))
    request = ModelRequest(model="openai:m", system="sys", messages=history(2), tools=TOOLS)
    try:
        for _ in range(2):
            items = [item async for item in provider.stream(request)]
            assert items
    finally:
        await provider.aclose()
    assert len(seen) == 2
    for posted in seen:
        assert posted.headers["content-type"] == "application/json"
        assert json.loads(posted.content) == request_body(
            request, model="m", accepts_images=config.accepts_images
        )
