"""The OpenAI Responses API provider: streaming `POST /responses` over httpx.

The API codex-style models are served on. Selected as `--model openai-responses:NAME`
(for example `openai-responses:gpt-5-codex`); configured by the same variables as the
`openai:` provider (`STEERABLE_BASE_URL` / `OPENAI_BASE_URL`, `STEERABLE_API_KEY` /
`OPENAI_API_KEY`, `STEERABLE_MODEL_IMAGES`, `STEERABLE_CONTEXT_WINDOW`; read by
`openai_compat.config_from_env`). What every HTTP provider shares — the pooled client,
retries before the first chunk, deadlines, the event loop and its errors — is
`http_stream.HttpStreamProvider`, and what it shares with the Chat Completions provider
(bearer auth, the HTTP status mapping) is `openai_compat.OpenAIStyleProvider`; this module
supplies the body and decoder of `responses_wire.py` (the answer ends with
`response.completed` or `response.incomplete`) and the mid-stream `error` /
`response.failed` events (rate limits and server errors are retried before the first
chunk, a context overflow is reported as such). Requests are
sent with `store: false`: nothing is kept server-side, so reasoning items are not carried
between turns (their summaries stream as reasoning). Error codes: those of `openai:`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from steerable_bridge.adapters.llm import openai_compat
from steerable_bridge.adapters.llm.http_stream import HttpConfig, require_model
from steerable_bridge.adapters.llm.openai_compat import (
    DEFAULT_BASE_URL,
    OpenAICompatProvider,
    OpenAIStyleProvider,
)
from steerable_bridge.adapters.llm.responses_wire import (
    EventDecoder,
    ResponsesFailure,
    request_body,
)
from steerable_bridge.runtime.ports.model import ModelChunk, ModelRequest

__all__ = ["OpenAIResponsesProvider", "ResponsesConfig", "config_from_env", "factory", "register"]

_RETRY_CODES = {"rate_limit_exceeded": "rate_limited", "server_error": "server_error"}
"""Codes of a failed stream worth another try (before the first chunk), and our code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesConfig(HttpConfig):
    """Where and how to call one model (the settings are `HttpConfig`'s)."""

    base_url: str = DEFAULT_BASE_URL


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> ResponsesConfig:
    """The config for `openai-responses:MODEL`; RouteError on a bad value."""
    require_model("openai-responses", model, "openai-responses:gpt-5-codex")
    chat = openai_compat.config_from_env(model, env)  # the same variables as `openai:`
    return ResponsesConfig(**{f.name: getattr(chat, f.name) for f in dataclasses.fields(chat)})


class OpenAIResponsesProvider(OpenAIStyleProvider[ResponsesConfig, EventDecoder]):
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

    def body(self, request: ModelRequest) -> dict[str, Any]:
        config = self.config
        return request_body(request, model=config.model, accepts_images=config.accepts_images)

    def decoder(self) -> EventDecoder:
        return EventDecoder()

    def feed(self, decoder: EventDecoder, payload: dict[str, Any], tries: int) -> list[ModelChunk]:
        try:
            return decoder.feed(payload)
        except ResponsesFailure as failure:
            if failure.code == "context_length_exceeded":
                raise self.overflowed(failure.message) from None
            retry_as = _RETRY_CODES.get(failure.code)
            raise self.failed_mid_stream(
                failure.code, failure.message, tries, retry_as=retry_as, code="provider_error"
            ) from None


factory = OpenAIResponsesProvider.factory
"""`factory(env, deadlines)`: builds the `openai-responses:NAME` provider of a route."""
register = OpenAIResponsesProvider.register
"""`register(router, env, deadlines)`: offers `openai-responses:NAME` routes on `router`."""
