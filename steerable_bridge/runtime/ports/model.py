"""The model port: one immutable request in, a stream of chunks and exactly one response out.

`ModelProvider` is the contract every LLM adapter implements (see `adapters/llm`). The loop
builds a `ModelRequest` from a snapshot of history, prompt and tools, logs it, then calls
`provider.stream(request)`. A conforming stream yields zero or more `ModelChunk`s followed
by exactly one `ModelResponse`; anything else (no response, chunks after it, two responses)
is a protocol error the loop logs as `run_failed` — it never invents an assistant message.
Failures a provider can name are raised as `ProviderError` with a stable code and a message
that tells the user what to do.

    class EchoProvider:
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
            yield TextChunk(delta=request.messages[-1].text)
            yield ModelResponse(finish_reason="end_turn")
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.values import Message, Usage

__all__ = [
    "CONTEXT_OVERFLOW",
    "FinishReason",
    "ModelChunk",
    "ModelInfo",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "ProviderError",
    "ReasoningChunk",
    "TextChunk",
    "ToolCallChunk",
    "ToolSpec",
    "context_window",
]

FinishReason = Literal["end_turn", "tool_calls", "max_tokens", "refusal", "cancelled", "error"]
"""Why a model call ended. Providers report the first four; the loop adds the last two."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it; `parameters_json` is its JSON Schema as canonical JSON."""

    name: str
    description: str
    parameters_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call sees. Logged in full before the provider starts."""

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    one_off: bool = False
    """A request whose prompt will not be sent again (a compaction summary, a title): the
    provider must not write it to its prompt cache."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextChunk:
    """A piece of assistant text."""

    type: Literal["text"] = "text"
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningChunk:
    """A piece of the model's visible reasoning.

    A chunk with `signature` seals the reasoning block streamed so far (the next reasoning
    chunk starts a new block); one with `redacted_data` is a whole block the provider
    encrypted. Both must reach the log, since the provider wants them back unchanged.
    """

    type: Literal["reasoning"] = "reasoning"
    delta: str
    signature: str | None = None
    redacted_data: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallChunk:
    """A piece of a tool call. The first chunk of a call carries its `name`."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str | None = None
    arguments_delta: str = ""
    recovered_from: str | None = None
    """Set on a call the model wrote as text: the format it was recovered from."""


ModelChunk = TextChunk | ReasoningChunk | ToolCallChunk


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """The end of one model call: why it stopped and what it cost."""

    type: Literal["response"] = "response"
    finish_reason: FinishReason
    usage: Usage = Usage()
    model: str | None = None
    replaced_surrogates: int = 0
    """How many lone UTF-16 surrogates the provider found in the stream and replaced with
    U+FFFD (`surrogates.py`); the loop logs a `hook_action` saying so when it is not 0."""


ModelStreamItem = ModelChunk | ModelResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """What the runtime knows about a route: its context window and whether it sees images."""

    route: str
    context_window: int | None = None
    accepts_images: bool = False
    accepts_documents: bool = False
    """Whether the model reads PDF documents (a `ResourcePart` whose uri is a base64
    `data:application/pdf` URI)."""
    needs_api_key_env: str | None = None
    """An environment variable the route needs but does not have (None when usable)."""
    window_guessed: bool = False
    """`context_window` is only a guess from the model's name (no server reported it)."""


CONTEXT_OVERFLOW = "context_overflow"
"""The `ProviderError` code every adapter uses when the request exceeds the model's context
window; the loop answers it with one compaction and one retry."""


class ProviderError(CodedError):
    """A failure a provider can name: `code` is stable, `message` names the remedy."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(code, message)
        self.retryable = retryable


async def context_window(provider: ModelProvider) -> int | None:
    """The route's context window: a provider that can ask its server has an
    `async discover_window()` (done once per route, cached by the adapter); otherwise
    `info.context_window`. None: unknown (then only overflow recovery applies)."""
    discover = getattr(provider, "discover_window", None)
    if discover is not None:
        window: int | None = await discover()
        return window
    return provider.info.context_window


class ModelProvider(Protocol):
    """Streams one model call.

    Contract: yield zero or more `ModelChunk`s, then exactly one `ModelResponse`, then stop.
    Tool-call chunks of one call share its `call_id`; the first carries the `name`. Every
    string must encode as UTF-8: a provider repairs lone surrogates where it decodes them
    (`surrogates.SurrogateJoiner`) and counts them in `replaced_surrogates`. Raise
    `ProviderError` for failures with a remedy. The caller cancels by cancelling the
    surrounding anyio scope; a provider must bound every network wait with a timeout.
    """

    @property
    def info(self) -> ModelInfo: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]: ...
