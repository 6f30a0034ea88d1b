"""The model port (`runtime/ports/model.py`): a conforming provider streams chunks, then exactly
one `ModelResponse`; `context_window` asks a provider that can discover its window and
otherwise reads its `info`; `ProviderError` carries a stable code, a remedy and whether a
retry may help; the values a provider sees and sends are frozen, with the documented
defaults. How the loop treats a provider that breaks the contract is in `test_loop.py`."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.model import (
    CONTEXT_OVERFLOW,
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    context_window,
)
from steerable_bridge.runtime.values import Message, TextPart, Usage
from tests.runtime.harness import scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REQUEST = ModelRequest(
    model="test:m",
    system="Be brief.",
    messages=(Message(id="u1", role="user", content=(TextPart(text="hi"),)),),
)


class Fixed:
    """A provider that only knows the window it was told."""

    def __init__(self, window: int | None) -> None:
        self._info = ModelInfo(route="test:fixed", context_window=window)

    @property
    def info(self) -> ModelInfo:
        return self._info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        yield ModelResponse(finish_reason="end_turn")


class Discovers(Fixed):
    """A provider that asks its server for the window (which wins over `info`)."""

    def __init__(self) -> None:
        super().__init__(1000)
        self.asked = 0

    async def discover_window(self) -> int | None:
        self.asked += 1
        return 32_768


async def test_the_window_comes_from_discovery_when_a_provider_can_discover_it() -> None:
    discovering = Discovers()
    assert await context_window(discovering) == 32_768 and discovering.asked == 1
    assert await context_window(Fixed(8192)) == 8192
    assert await context_window(Fixed(None)) is None


@pytest.mark.parametrize(
    "provider",
    [DemoProvider(pace_ms=0), scripted({"text": "hello", "chunk_size": 2}), Fixed(None)],
    ids=["demo", "scripted", "fixed"],
)
async def test_a_conforming_stream_ends_in_exactly_one_response(provider: object) -> None:
    items = [item async for item in provider.stream(REQUEST)]  # type: ignore[attr-defined]
    responses = [i for i in items if isinstance(i, ModelResponse)]
    assert len(responses) == 1 and items[-1] is responses[0]
    assert all(isinstance(i, TextChunk | ReasoningChunk | ToolCallChunk) for i in items[:-1])


def test_a_provider_error_has_a_code_a_remedy_and_a_retry_verdict() -> None:
    error = ProviderError(CONTEXT_OVERFLOW, "the request is too long; send less")
    assert isinstance(error, CodedError) and error.code == "context_overflow"
    assert str(error) == "the request is too long; send less" and not error.retryable
    assert ProviderError("model_timeout", "slow; retry", retryable=True).retryable


def test_the_defaults_a_provider_relies_on() -> None:
    assert (REQUEST.tools, REQUEST.max_tokens, REQUEST.temperature) == ((), None, None)
    assert not REQUEST.one_off
    response = ModelResponse(finish_reason="end_turn")
    assert response.usage == Usage() and response.model is None
    assert response.replaced_surrogates == 0
    info = ModelInfo(route="x:y")
    assert info.context_window is None and not info.accepts_images
    assert not info.accepts_documents and not info.window_guessed
    assert info.needs_api_key_env is None
    chunk = ToolCallChunk(call_id="c1")
    assert chunk.name is None and chunk.arguments_delta == "" and chunk.recovered_from is None
    reasoning = ReasoningChunk(delta="x")
    assert reasoning.signature is None and reasoning.redacted_data is None


@pytest.mark.parametrize(
    "value",
    [
        REQUEST,
        ToolSpec(name="t", description="", parameters_json="{}"),
        TextChunk(delta="x"),
        ModelResponse(finish_reason="end_turn"),
        ModelInfo(route="x:y"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_what_crosses_the_port_is_frozen(value: object) -> None:
    field = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)
