"""The OpenAI Responses API provider: streaming `POST /responses` over httpx.

The API codex-style models are served on. Selected as `--model openai-responses:NAME`
(for example `openai-responses:gpt-5-codex`); configured by the same variables as the
`openai:` provider (`STEERABLE_BASE_URL` / `OPENAI_BASE_URL`, `STEERABLE_API_KEY` /
`OPENAI_API_KEY`, `STEERABLE_MODEL_IMAGES`, `STEERABLE_CONTEXT_WINDOW`; read by
`openai_compat.config_from_env`). What every HTTP provider shares — the pooled client,
retries before the first chunk, deadlines, the event loop and its errors — is
`http_stream.HttpStreamProvider`; this module supplies the headers, the body and decoder
of `responses_wire.py` (the answer ends with `response.completed` or
`response.incomplete`), the mid-stream `error` / `response.failed` events (rate limits and
server errors are retried before the first chunk, a context overflow is reported as such)
and the HTTP status mapping it shares with the Chat Completions provider. Requests are
sent with `store: false`: nothing is kept server-side, so reasoning items are not carried
between turns (their summaries stream as reasoning). Error codes: those of `openai:`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from steerable_bridge.adapters.llm import openai_compat
from steerable_bridge.adapters.llm.http_replies import attempts
from steerable_bridge.adapters.llm.http_stream import HttpConfig, HttpStreamProvider, bearer_headers
from steerable_bridge.adapters.llm.openai_compat import (
    DEFAULT_BASE_URL,
    OpenAICompatProvider,
    openai_status_error,
)
from steerable_bridge.adapters.llm.responses_wire import (
    EventDecoder,
    ResponsesFailure,
    request_body,
)
from steerable_bridge.adapters.llm.retrying import RetryableError
from steerable_bridge.runtime.model import CONTEXT_OVERFLOW, ModelChunk, ModelRequest, ProviderError
from steerable_bridge.runtime.routing import RouteError

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIResponsesProvider", "ResponsesConfig", "config_from_env", "factory", "register"]

_RETRY_CODES = {"rate_limit_exceeded": "rate_limited", "server_error": "server_error"}
"""Codes of a failed stream worth another try (before the first chunk), and our code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesConfig(HttpConfig):
    """Where and how to call one model (the settings are `HttpConfig`'s)."""

    base_url: str = DEFAULT_BASE_URL


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> ResponsesConfig:
    """The config for `openai-responses:MODEL`; RouteError on a bad value."""
    if not model or model == "default":
        raise RouteError(
            "missing_model",
            "the openai-responses provider needs a model name: use --model"
            " openai-responses:NAME (for example openai-responses:gpt-5-codex)",
        )
    chat = openai_compat.config_from_env(model, env)  # the same variables as `openai:`
    return ResponsesConfig(**{f.name: getattr(chat, f.name) for f in dataclasses.fields(chat)})


class OpenAIResponsesProvider(HttpStreamProvider[ResponsesConfig, EventDecoder]):
    """A `ModelProvider` over `/responses` with `stream: true` (see `http_stream.py` for
    the pooled client, retries and deadlines it shares with every HTTP provider, and a
    usage example)."""

    prefix = "openai-responses"
    path = "/responses"
    remedies = dataclasses.replace(
        OpenAICompatProvider.remedies,  # the same server hints as `openai:`
        endpoint="check that STEERABLE_BASE_URL points at a /v1 endpoint that serves /responses",
        missing_key="set {key_env} (or point STEERABLE_BASE_URL at a local server)",
        incomplete=" (no response.completed); send the prompt again",
    )

    @classmethod
    def config_from_env(cls, model: str, env: Mapping[str, str] | None) -> ResponsesConfig:
        return config_from_env(model, env)

    def headers(self) -> dict[str, str]:
        return bearer_headers(self.config.api_key)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        config = self.config
        return request_body(request, model=config.model, accepts_images=config.accepts_images)

    def decoder(self) -> EventDecoder:
        return EventDecoder()

    def ended(self, decoder: EventDecoder) -> bool:
        return decoder.stopped

    def feed(self, decoder: EventDecoder, payload: dict[str, Any], tries: int) -> list[ModelChunk]:
        try:
            return decoder.feed(payload)
        except ResponsesFailure as failure:
            base = self.config.base_url
            if failure.code == "context_length_exceeded":
                raise ProviderError(
                    CONTEXT_OVERFLOW,
                    f"the model server says the request does not fit the context window:"
                    f" {failure.message} — compact the session (/compact) or start a new one",
                ) from None
            if failure.code in _RETRY_CODES:
                raise RetryableError(
                    _RETRY_CODES[failure.code],
                    f"{base} failed mid-stream ({failure.code}: {failure.message})"
                    f"{attempts(tries)} — the service is busy; send the prompt again later",
                ) from None
            raise ProviderError(
                "provider_error",
                f"{base} reported an error mid-stream ({failure.code}: {failure.message})",
            ) from None

    def status_error(self, reply: httpx.Response, tries: int) -> ProviderError:
        config = self.config
        return openai_status_error(
            reply,
            tries,
            base_url=config.base_url,
            route=f"{self.prefix}:NAME",
            model=config.model,
            path=self.path,
        )


factory = OpenAIResponsesProvider.factory
"""`factory(env, deadlines)`: builds the `openai-responses:NAME` provider of a route."""
register = OpenAIResponsesProvider.register
"""`register(router, env, deadlines)`: offers `openai-responses:NAME` routes on `router`."""
