"""Context-overflow answers of real servers are recognised; other 400s are not."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.adapters.llm.overflow import is_context_overflow
from steerable_bridge.runtime.ports.model import ModelRequest, ProviderError
from steerable_bridge.runtime.values import Message, TextPart

OVERFLOWS: list[tuple[int, Any]] = [
    (  # OpenAI
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your"
                " messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    ),
    (  # vLLM
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 2048 tokens. However, you"
            " requested 2100 tokens (2000 in the messages, 100 in the completion).",
            "type": "BadRequestError",
            "code": 400,
        },
    ),
    (  # llama.cpp server
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
    ),
    (400, {"error": "prompt is too long: 5000 tokens > 4096 maximum"}),  # proxies
    (413, "Request too large: input length exceeds maximum context length"),
]

NOT_OVERFLOWS: list[tuple[int, Any]] = [
    (400, {"error": {"message": "tools are not supported by this model", "code": None}}),
    (400, {"error": {"message": "invalid image url"}}),
    (401, {"error": {"message": "maximum context length is 10 tokens"}}),
]


@pytest.mark.parametrize(("status", "body"), OVERFLOWS)
def test_overflow_answers_are_recognised(status: int, body: Any) -> None:
    assert is_context_overflow(status, body)


@pytest.mark.parametrize(("status", "body"), NOT_OVERFLOWS)
def test_other_errors_are_not_overflows(status: int, body: Any) -> None:
    assert not is_context_overflow(status, body)


@pytest.mark.anyio
async def test_the_provider_raises_context_overflow_with_a_remedy() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=json.dumps(OVERFLOWS[0][1]).encode())

    provider = OpenAICompatProvider(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"),
        transport=httpx.MockTransport(handler),
    )
    request = ModelRequest(
        model="m",
        system="",
        messages=(Message(id="u", role="user", content=(TextPart(text="x"),)),),
    )
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(request):
            pass
    assert info.value.code == "context_overflow"
    assert "/compact" in info.value.message
