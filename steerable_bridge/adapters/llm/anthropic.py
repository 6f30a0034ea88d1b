"""The Anthropic model provider: the streaming Messages API over httpx.

Selected as `--model anthropic:MODEL` (for example `anthropic:claude-sonnet-4-5`);
configured by `ANTHROPIC_API_KEY` (falls back to `STEERABLE_API_KEY`; not needed when the
base URL is loopback), `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`),
`STEERABLE_CONTEXT_WINDOW` (default 200,000), `STEERABLE_MAX_OUTPUT_TOKENS` (default
8,192), `STEERABLE_THINKING_BUDGET` (extended thinking's token budget, off when unset) and
the prompt-cache settings of `cache_shaping.py`. Each request carries the cache anchors
that module places. What every HTTP provider shares — one pooled client, retries before
the first chunk (here also on 529 overloaded and on a retryable `error` event), deadlines,
the event loop, the drain after `message_stop` that returns the connection to the pool —
is `http_stream.HttpStreamProvider`; this module supplies the wire's headers, body (with
the cache anchors), decoder (`anthropic_wire.py`), its mid-stream `error` events and its
mapping of HTTP statuses to errors. Error codes: auth_required, auth_failed,
permission_denied, model_not_found, bad_request, context_overflow (recognised in
`overflow.py`; the loop compacts and retries), rate_limited, overloaded, server_error,
connection_failed, connect_timeout, read_timeout, model_timeout (`deadlines.py`),
connection_lost, invalid_response, provider_error, stream_incomplete, http_error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from steerable_bridge.adapters.llm.anthropic_wire import EventDecoder, StreamFailure, request_body
from steerable_bridge.adapters.llm.cache_shaping import (
    CachePolicy,
    cache_policy_from_env,
    place_anchors,
)
from steerable_bridge.adapters.llm.http_replies import (
    attempts,
    json_or_text,
    retry_after,
    shortened,
)
from steerable_bridge.adapters.llm.http_stream import (
    HttpConfig,
    HttpStreamProvider,
    Remedies,
    require_model,
)
from steerable_bridge.adapters.llm.overflow import is_context_overflow
from steerable_bridge.adapters.llm.retrying import RetryableError
from steerable_bridge.adapters.llm.window import tokens_from_env, window_from_env
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.encoding.surrogates import scrub
from steerable_bridge.runtime.ports.model import (
    CONTEXT_OVERFLOW,
    ModelChunk,
    ModelRequest,
    ProviderError,
)

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "AnthropicConfig",
    "AnthropicProvider",
    "config_from_env",
    "factory",
    "register",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_STREAM_ERROR_CODES = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "server_error",
}
"""Error events worth a retry (before the first chunk), and the code each fails with."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicConfig(HttpConfig):
    """Where and how to call one model: `HttpConfig`'s settings with Anthropic's defaults,
    and its own. Build it from the environment with `config_from_env`."""

    base_url: str = DEFAULT_BASE_URL
    key_env: str = "ANTHROPIC_API_KEY"
    context_window: int | None = 200_000
    max_tokens: int = 8192
    thinking_budget: int | None = None
    cache: CachePolicy = field(default_factory=CachePolicy)


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> AnthropicConfig:
    """The config for `anthropic:MODEL` from environment variables; RouteError on a bad value."""
    env = os.environ if env is None else env
    require_model("anthropic", model, "anthropic:claude-sonnet-4-5")
    base_url = (env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    if base_url.endswith("/v1"):
        base_url = base_url[:-3]  # the SDKs' convention: the base URL excludes /v1
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RouteError(
            "invalid_base_url",
            f"ANTHROPIC_BASE_URL {base_url!r} is not an http(s) URL; unset it to use"
            f" {DEFAULT_BASE_URL}",
        )
    return AnthropicConfig(
        model=model,
        base_url=base_url,
        api_key=env.get("ANTHROPIC_API_KEY") or env.get("STEERABLE_API_KEY") or None,
        context_window=window_from_env(env) or 200_000,
        max_tokens=tokens_from_env(env, "STEERABLE_MAX_OUTPUT_TOKENS") or 8192,
        thinking_budget=tokens_from_env(env, "STEERABLE_THINKING_BUDGET", minimum=1024),
        cache=cache_policy_from_env(env),
    )


class AnthropicProvider(HttpStreamProvider[AnthropicConfig, EventDecoder]):
    """A `ModelProvider` over `POST /v1/messages` with `stream: true` (see `http_stream.py`
    for the pooled client, retries and deadlines it shares with every HTTP provider, and a
    usage example)."""

    prefix = "anthropic"
    path = "/v1/messages"
    accepts_documents = True
    remedies = Remedies(
        endpoint="check that ANTHROPIC_BASE_URL points at the Anthropic API",
        unreachable="check your network or ANTHROPIC_BASE_URL",
        slow="the service may be overloaded; try again",
        missing_key="set ANTHROPIC_API_KEY (or STEERABLE_API_KEY), or point ANTHROPIC_BASE_URL"
        " at a local server",
        incomplete=" (no message_stop); send the prompt again",
    )

    @classmethod
    def config_from_env(cls, model: str, env: Mapping[str, str] | None) -> AnthropicConfig:
        return config_from_env(model, env)

    def headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream", "anthropic-version": API_VERSION}
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body `stream(request)` sends, cache anchors included."""
        config = self.config
        body = request_body(
            request,
            model=config.model,
            max_tokens=config.max_tokens,
            accepts_images=config.accepts_images,
            thinking_budget=config.thinking_budget,
        )
        return place_anchors(body, config.cache, one_off=request.one_off)

    def decoder(self) -> EventDecoder:
        return EventDecoder()

    def feed(self, decoder: EventDecoder, payload: dict[str, Any], tries: int) -> list[ModelChunk]:
        try:
            return decoder.feed(payload)
        except StreamFailure as failure:
            kind = failure.error_type
            raise self.failed_mid_stream(
                kind,
                failure.message,
                tries,
                retry_as=_STREAM_ERROR_CODES.get(kind),
                code="invalid_response" if kind == "invalid_event" else "provider_error",
            ) from None

    def status_error(self, reply: httpx.Response, tries: int) -> ProviderError:
        status = reply.status_code
        error_type, detail = _error_detail(reply)
        request_id = reply.headers.get("request-id")
        detail = f"HTTP {status} {error_type}: {detail}" + (
            f"; request id {request_id}" if request_id else ""
        )
        base = self.config.base_url
        if status == 401:
            return ProviderError(
                "auth_failed",
                f"{base} refused the API key ({detail}) — set ANTHROPIC_API_KEY to a valid key",
            )
        if status == 403:
            return ProviderError(
                "permission_denied",
                f"{base} does not let this key use {self.config.model!r} ({detail}) — check the"
                " key's workspace and model access",
            )
        if status == 404:
            return ProviderError(
                "model_not_found",
                f"{base} has no model {self.config.model!r} ({detail}) — check --model"
                " anthropic:NAME (for example anthropic:claude-sonnet-4-5)",
            )
        if is_context_overflow(status, json_or_text(reply)):
            return ProviderError(
                CONTEXT_OVERFLOW,
                f"the request does not fit the model's context window ({detail}) — compact or"
                " start a new session",
            )
        if status == 429:
            return RetryableError(
                "rate_limited",
                f"{base} is rate limiting requests{attempts(tries)} ({detail}) — wait and send"
                " the prompt again, or check your plan's limits",
                retry_after(reply),
            )
        if status == 529:
            return RetryableError(
                "overloaded",
                f"{base} is overloaded{attempts(tries)} ({detail}) — send the prompt again in"
                " a minute",
                retry_after(reply),
            )
        if status in _RETRY_STATUS:
            return RetryableError(
                "server_error",
                f"{base} failed{attempts(tries)} ({detail}) — try again later",
                retry_after(reply),
            )
        return ProviderError(
            "bad_request",
            f"{base} rejected the request ({detail}) — check that the model supports this"
            " request (tools, images, thinking)",
        )


def _error_detail(reply: httpx.Response) -> tuple[str, str]:
    """(error type, message) of an Anthropic error body, shortened."""
    data = json_or_text(reply)
    error_type, message = "error", data
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            error_type = str(inner.get("type") or "error")
            message = inner.get("message") or json.dumps(inner)
    return scrub(error_type), shortened(message)


factory = AnthropicProvider.factory
"""`factory(env, deadlines)`: builds the `anthropic:NAME` provider of a route."""
register = AnthropicProvider.register
"""`register(router, env, deadlines)`: offers `anthropic:NAME` routes on `router`."""
