"""The Anthropic model provider: the streaming Messages API over httpx.

Selected as `--model anthropic:MODEL` (for example `anthropic:claude-sonnet-4-5`);
configured by `ANTHROPIC_API_KEY` (falls back to `STEERABLE_API_KEY`; not needed when the
base URL is loopback), `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`),
`STEERABLE_CONTEXT_WINDOW` (default 200,000), `STEERABLE_MAX_OUTPUT_TOKENS` (default
8,192), `STEERABLE_THINKING_BUDGET` (extended thinking's token budget, off when unset) and
the prompt-cache settings of `cache_shaping.py`. Each request carries the cache anchors
that module places. The provider owns one pooled client (`http_client.PooledClient`: built
on first use, kept across steps and turns, closed by `aclose()` when the agent shuts down;
after `message_stop` the rest of the body is drained briefly so the connection goes back
to the pool). A request is retried on 429,
529 (overloaded), 5xx, a dropped connection or a retryable `error` event a bounded number
of times, honouring `retry-after`, but only *before* the first chunk was yielded (the loop
in `retrying.py`, shared with the OpenAI-compatible provider). Every
network wait is bounded, and every failure becomes a `ProviderError` whose message names
the remedy. The event stream is parsed by httpx-sse; payload mapping lives in
`anthropic_wire.py`. Error codes: auth_required, auth_failed, permission_denied,
model_not_found, bad_request, context_overflow (recognised in `overflow.py`; the loop
compacts and retries), rate_limited, overloaded, server_error,
connection_failed, connect_timeout, read_timeout, model_timeout (`deadlines.py`),
connection_lost, invalid_response, provider_error, stream_incomplete, http_error.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx

from steerable_bridge.adapters.llm.anthropic_wire import EventDecoder, StreamFailure, request_body
from steerable_bridge.adapters.llm.cache_shaping import (
    CachePolicy,
    cache_policy_from_env,
    place_anchors,
)
from steerable_bridge.adapters.llm.deadlines import CallClock, CallDeadlines
from steerable_bridge.adapters.llm.http_client import HttpSettings, PooledClient
from steerable_bridge.adapters.llm.http_replies import (
    attempts,
    drain,
    json_or_text,
    posted_events,
    retry_after,
)
from steerable_bridge.adapters.llm.openai_compat import is_loopback
from steerable_bridge.adapters.llm.overflow import is_context_overflow
from steerable_bridge.adapters.llm.retrying import RetryableError, RetryPolicy, stream_with_retries
from steerable_bridge.runtime.model import (
    CONTEXT_OVERFLOW,
    ModelChunk,
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
)
from steerable_bridge.runtime.routing import ModelRouter, RouteError
from steerable_bridge.runtime.surrogates import scrub

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "AnthropicConfig",
    "AnthropicProvider",
    "config_from_env",
    "register",
]

log = logging.getLogger(__name__)

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
class AnthropicConfig:
    """Where and how to call one model. Build it from the environment with `config_from_env`."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    key_env: str = "ANTHROPIC_API_KEY"
    """The variable to name when a key is needed and missing."""
    context_window: int | None = 200_000
    max_tokens: int = 8192
    thinking_budget: int | None = None
    cache: CachePolicy = field(default_factory=CachePolicy)
    accepts_images: bool = True
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 20.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    deadlines: CallDeadlines = CallDeadlines()
    """The whole call's deadline and the idle wait for the next token (`deadlines.py`)."""

    @property
    def needs_key(self) -> bool:
        return not self.api_key and not is_loopback(self.base_url)


def _positive(env: Mapping[str, str], name: str, *, minimum: int = 1) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise RouteError(
            "invalid_setting",
            f"{name}={text!r} must be a whole number of tokens, at least {minimum}",
        )
    return value


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> AnthropicConfig:
    """The config for `anthropic:MODEL` from environment variables; RouteError on a bad value."""
    env = os.environ if env is None else env
    if not model or model == "default":
        raise RouteError(
            "missing_model",
            "the anthropic provider needs a model name: use --model anthropic:NAME"
            " (for example anthropic:claude-sonnet-4-5)",
        )
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
        context_window=_positive(env, "STEERABLE_CONTEXT_WINDOW") or 200_000,
        max_tokens=_positive(env, "STEERABLE_MAX_OUTPUT_TOKENS") or 8192,
        thinking_budget=_positive(env, "STEERABLE_THINKING_BUDGET", minimum=1024),
        cache=cache_policy_from_env(env),
    )


class AnthropicProvider:
    """A `ModelProvider` over `POST /v1/messages` with `stream: true`.

    `transport` replaces httpx's network transport (tests pass `httpx.MockTransport`).

        provider = AnthropicProvider(config_from_env("claude-sonnet-4-5"))
        async for item in provider.stream(request):
            ...
        await provider.aclose()
    """

    def __init__(
        self, config: AnthropicConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.http = PooledClient(
            HttpSettings(
                connect_timeout_s=config.connect_timeout_s, read_timeout_s=config.read_timeout_s
            ),
            transport=transport,
        )
        self._retry = RetryPolicy(
            base_url=config.base_url,
            max_retries=config.max_retries,
            backoff_s=config.backoff_s,
            max_backoff_s=config.max_backoff_s,
            connect_timeout_s=config.connect_timeout_s,
            read_timeout_s=config.read_timeout_s,
            deadlines=config.deadlines,
            unreachable_hint="check your network or ANTHROPIC_BASE_URL",
            slow_hint="the service may be overloaded; try again",
        )
        self._info = ModelInfo(
            route=f"anthropic:{config.model}",
            context_window=config.context_window,
            accepts_images=config.accepts_images,
            accepts_documents=True,
            needs_api_key_env=config.key_env if config.needs_key else None,
        )

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def url(self) -> str:
        return f"{self.config.base_url}/v1/messages"

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

    async def aclose(self) -> None:
        """Close the pooled client and its connections."""
        await self.http.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        config = self.config
        if config.needs_key:
            raise ProviderError(
                "auth_required",
                f"{config.base_url} needs an API key: set ANTHROPIC_API_KEY (or"
                " STEERABLE_API_KEY), or point ANTHROPIC_BASE_URL at a local server",
            )
        body = self.body(request)
        headers = {"accept": "text/event-stream", "anthropic-version": API_VERSION}
        if config.api_key:
            headers["x-api-key"] = config.api_key
        client = await self.http.client()
        attempt = partial(self._attempt, client, body, headers)
        async for item in stream_with_retries(attempt, self._retry):
            yield item

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        headers: dict[str, str],
        tries: int,
        clock: CallClock,
    ) -> AsyncGenerator[ModelStreamItem, None]:
        """One try: the answer's chunks, then its `ModelResponse`."""
        config = self.config
        decoder = EventDecoder()
        async with posted_events(
            client,
            self.url,
            body=body,
            headers=headers,
            refuse=lambda reply: self._status_error(reply, tries),
            clock=clock,
            base_url=config.base_url,
            hint="check that ANTHROPIC_BASE_URL points at the Anthropic API",
        ) as events:
            async for data in events:
                for chunk in self._decode(decoder, data, tries):
                    yield chunk
                if decoder.stopped:
                    await drain(events)
                    break
        for chunk in decoder.flush():
            yield chunk
        replaced = decoder.replaced_surrogates
        if replaced:
            log.warning(
                "%s: the model stream held %d lone UTF-16 surrogate(s); replaced with U+FFFD",
                config.base_url,
                replaced,
            )
        if decoder.finish_reason is None or not decoder.stopped:
            raise ProviderError(
                "stream_incomplete",
                f"{config.base_url} closed the stream before the answer finished"
                " (no message_stop); send the prompt again",
            )
        yield ModelResponse(
            finish_reason=decoder.finish_reason,
            usage=decoder.usage,
            model=decoder.model or config.model,
            replaced_surrogates=replaced,
        )

    def _decode(self, decoder: EventDecoder, data: str, attempt: int) -> list[ModelChunk]:
        try:
            payload = json.loads(data)
        except ValueError:
            raise ProviderError(
                "invalid_response",
                f"{self.config.base_url} sent a stream event that is not JSON: {data[:200]!r};"
                " check that ANTHROPIC_BASE_URL points at the Anthropic API",
            ) from None
        if not isinstance(payload, dict):
            return []
        try:
            return decoder.feed(payload)
        except (AttributeError, TypeError, ValueError) as err:  # a shape the decoder missed
            raise ProviderError(
                "invalid_response",
                f"{self.config.base_url} sent a stream event of an unexpected shape ({err}):"
                f" {data[:200]!r}; check that ANTHROPIC_BASE_URL points at the Anthropic API",
            ) from None
        except StreamFailure as failure:
            base = self.config.base_url
            if failure.error_type in _STREAM_ERROR_CODES:
                code = _STREAM_ERROR_CODES[failure.error_type]
                raise RetryableError(
                    code,
                    f"{base} failed mid-stream ({failure.error_type}: {failure.message})"
                    f"{attempts(attempt)} — the service is busy; send the prompt again later",
                ) from None
            raise ProviderError(
                "invalid_response" if failure.error_type == "invalid_event" else "provider_error",
                f"{base} reported an error mid-stream ({failure.error_type}: {failure.message})",
            ) from None

    def _status_error(self, reply: httpx.Response, attempt: int) -> ProviderError:
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
                f"{base} is rate limiting requests{attempts(attempt)} ({detail}) — wait and send"
                " the prompt again, or check your plan's limits",
                retry_after(reply),
            )
        if status == 529:
            return RetryableError(
                "overloaded",
                f"{base} is overloaded{attempts(attempt)} ({detail}) — send the prompt again in"
                " a minute",
                retry_after(reply),
            )
        if status in _RETRY_STATUS:
            return RetryableError(
                "server_error",
                f"{base} failed{attempts(attempt)} ({detail}) — try again later",
                retry_after(reply),
            )
        return ProviderError(
            "bad_request",
            f"{base} rejected the request ({detail}) — check that the model supports this"
            " request (tools, images, thinking)",
        )


def _error_detail(reply: httpx.Response) -> tuple[str, str]:
    """(error type, message) of an Anthropic error body, shortened."""
    try:
        data = reply.json()
    except ValueError:
        data = reply.text
    error_type, message = "error", data
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            error_type = str(inner.get("type") or "error")
            message = inner.get("message") or json.dumps(inner)
    text = scrub(" ".join(str(message).split()))
    error_type = scrub(error_type)
    return error_type, (text[:300] + "...") if len(text) > 300 else (text or "no detail")


def register(router: ModelRouter) -> None:
    """Offer `anthropic:NAME` routes, configured from the environment when resolved."""

    def factory(model: str) -> AnthropicProvider:
        return AnthropicProvider(config_from_env(model))

    router.register("anthropic", factory)
