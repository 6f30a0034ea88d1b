"""The OpenAI-compatible model provider: streaming Chat Completions over httpx.

Works with OpenAI and with the servers that speak its API — Ollama, vLLM, llama.cpp,
LM Studio. Selected as `--model openai:NAME`; configured by `STEERABLE_BASE_URL` (falls back
to `OPENAI_BASE_URL`, default `https://api.openai.com/v1`), `STEERABLE_API_KEY` (falls back
to `OPENAI_API_KEY`; not needed when the base URL is loopback), `STEERABLE_MODEL_IMAGES`
(`0` for text-only models) and `STEERABLE_CONTEXT_WINDOW`. A provider owns one pooled
`httpx.AsyncClient` (`http_client.PooledClient`: built on first use, kept alive across
steps and turns, closed by `aclose()` when the agent shuts down), retries 429 / 5xx /
dropped connections with exponential backoff a bounded number of times *before any chunk
was yielded* (`retrying.py`), bounds connect and read waits with
timeouts, and turns every failure into a `ProviderError` whose message names the remedy.
The event stream is parsed by httpx-sse (no hand-written SSE framing); each event's
`data` is one JSON chunk, or `[DONE]`. Payload mapping lives in `openai_wire.py`.
Error codes: auth_required, auth_failed, model_not_found, bad_request, context_overflow
(recognised in `overflow.py`), rate_limited, server_error, connection_failed,
connect_timeout, read_timeout, model_timeout (`deadlines.py`), connection_lost,
invalid_response, provider_error, stream_incomplete, http_error.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx

from steerable_bridge.adapters.llm.deadlines import CallClock, CallDeadlines
from steerable_bridge.adapters.llm.http_client import HttpSettings, PooledClient
from steerable_bridge.adapters.llm.http_replies import (
    attempts,
    drain,
    json_or_text,
    posted_events,
    retry_after,
)
from steerable_bridge.adapters.llm.openai_wire import ChunkDecoder, request_body
from steerable_bridge.adapters.llm.overflow import is_context_overflow
from steerable_bridge.adapters.llm.retrying import RetryableError, RetryPolicy, stream_with_retries
from steerable_bridge.adapters.llm.window import WindowCache, discover_window
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
    "DEFAULT_BASE_URL",
    "OpenAICompatProvider",
    "OpenAIConfig",
    "config_from_env",
    "is_loopback",
    "register",
]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
WINDOWS = WindowCache()
"""Context windows found per (base URL, model), shared by every provider of the process."""
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIConfig:
    """Where and how to call one model. Build it from the environment with `config_from_env`."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    key_env: str = "STEERABLE_API_KEY"
    """The variable to name when a key is needed and missing."""
    accepts_images: bool = True
    context_window: int | None = None
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


def is_loopback(url: str) -> bool:
    """True for http(s)://localhost, 127.x.x.x and [::1] URLs."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> OpenAIConfig:
    """The config for `openai:MODEL` from environment variables; RouteError on a bad value."""
    env = os.environ if env is None else env
    if not model or model == "default":
        raise RouteError(
            "missing_model",
            "the openai provider needs a model name: use --model openai:NAME"
            " (for example openai:gpt-4o-mini, or openai:llama3.2 with Ollama)",
        )
    base_url = (
        env.get("STEERABLE_BASE_URL") or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    ).rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RouteError(
            "invalid_base_url",
            f"base URL {base_url!r} is not an http(s) URL; set STEERABLE_BASE_URL to one such as"
            " http://127.0.0.1:11434/v1",
        )
    api_key = env.get("STEERABLE_API_KEY") or env.get("OPENAI_API_KEY") or None
    images = env.get("STEERABLE_MODEL_IMAGES", "1").strip().lower()
    if images not in ("1", "0", "true", "false", "yes", "no"):
        raise RouteError(
            "invalid_setting", f"STEERABLE_MODEL_IMAGES={images!r} must be 1 or 0 (true or false)"
        )
    window_text = env.get("STEERABLE_CONTEXT_WINDOW", "").strip()
    window: int | None = None
    if window_text:
        try:
            window = int(window_text)
        except ValueError:
            window = 0
        if window <= 0:
            raise RouteError(
                "invalid_setting",
                f"STEERABLE_CONTEXT_WINDOW={window_text!r} must be a positive number of tokens",
            )
    return OpenAIConfig(
        model=model,
        base_url=base_url,
        api_key=api_key,
        accepts_images=images in ("1", "true", "yes"),
        context_window=window,
    )


class OpenAICompatProvider:
    """A `ModelProvider` over `/chat/completions` with `stream: true`.

    `transport` replaces httpx's network transport (tests pass `httpx.MockTransport`).
    Every `stream()` reuses the provider's one pooled client; `aclose()` closes it.

        provider = OpenAICompatProvider(config_from_env("gpt-4o-mini"))
        async for item in provider.stream(request):
            ...
        await provider.aclose()
    """

    def __init__(
        self, config: OpenAIConfig, *, transport: httpx.AsyncBaseTransport | None = None
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
            unreachable_hint="start the model server or set STEERABLE_BASE_URL",
            slow_hint="the model server may be overloaded or loading the model; try again",
        )
        self._info = ModelInfo(
            route=f"openai:{config.model}",
            context_window=config.context_window,
            accepts_images=config.accepts_images,
            needs_api_key_env=config.key_env if config.needs_key else None,
        )

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def url(self) -> str:
        return f"{self.config.base_url}/chat/completions"

    async def aclose(self) -> None:
        """Close the pooled client and its connections."""
        await self.http.aclose()

    async def discover_window(self) -> int | None:
        """The route's context window: `STEERABLE_CONTEXT_WINDOW`, else what the server
        reports (asked once per base URL and model per process, see `window.py`)."""
        config = self.config
        if config.context_window is not None or config.needs_key:
            return self._info.context_window
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        client = await self.http.client()
        window = await WINDOWS.get(
            (config.base_url, config.model),
            lambda: discover_window(client, config.base_url, config.model, headers=headers),
        )
        if window != self._info.context_window:
            self._info = dataclasses.replace(self._info, context_window=window)
        return window

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        config = self.config
        if config.needs_key:
            raise ProviderError(
                "auth_required",
                f"{config.base_url} needs an API key: set {config.key_env}"
                " (or point STEERABLE_BASE_URL at a local server such as Ollama)",
            )
        body = request_body(request, model=config.model, accepts_images=config.accepts_images)
        headers = {"Accept": "text/event-stream"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
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
        decoder = ChunkDecoder()
        async with posted_events(
            client,
            self.url,
            body=body,
            headers=headers,
            refuse=lambda reply: self._status_error(reply, tries),
            clock=clock,
            base_url=config.base_url,
            hint="check that STEERABLE_BASE_URL points at an OpenAI-compatible /v1 endpoint",
        ) as events:
            async for data in events:
                for chunk in self._decode(decoder, data):
                    yield chunk
                if data == "[DONE]":
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
        if decoder.finish_reason is None:
            raise ProviderError(
                "stream_incomplete",
                f"{config.base_url} closed the stream before the answer finished;"
                " send the prompt again or check the model server's log",
            )
        yield ModelResponse(
            finish_reason=decoder.finish_reason,
            usage=decoder.usage,
            model=decoder.model or config.model,
            replaced_surrogates=replaced,
        )

    def _decode(self, decoder: ChunkDecoder, data: str) -> list[ModelChunk]:
        if data == "[DONE]":
            if decoder.finish_reason is None:
                decoder.finish_reason = "end_turn"  # some servers omit it before [DONE]
            return []
        try:
            payload = json.loads(data)
        except ValueError:
            raise ProviderError(
                "invalid_response",
                f"{self.config.base_url} sent a stream line that is not JSON: {data[:200]!r};"
                " check that STEERABLE_BASE_URL points at an OpenAI-compatible /v1 endpoint",
            ) from None
        if not isinstance(payload, dict):
            return []
        error = payload.get("error")
        if error and is_context_overflow(0, payload):
            raise ProviderError(
                CONTEXT_OVERFLOW,
                f"the model server says the request does not fit the context window:"
                f" {_error_text(error)} — compact the session (/compact) or start a new one",
            )
        if error:
            raise ProviderError(
                "provider_error",
                f"the model server reported an error mid-stream: {_error_text(error)}",
            )
        try:
            return decoder.feed(payload)
        except (AttributeError, TypeError, ValueError) as err:  # a shape the decoder missed
            raise ProviderError(
                "invalid_response",
                f"{self.config.base_url} sent a stream event of an unexpected shape ({err}):"
                f" {data[:200]!r}; check that STEERABLE_BASE_URL points at an OpenAI-compatible"
                " /v1 endpoint",
            ) from None

    def _status_error(self, reply: httpx.Response, attempt: int) -> ProviderError:
        status = reply.status_code
        body = json_or_text(reply)
        detail = _error_text(body)
        base = self.config.base_url
        if is_context_overflow(status, body):
            return ProviderError(
                CONTEXT_OVERFLOW,
                f"the request does not fit {self.config.model!r}'s context window (HTTP {status}:"
                f" {detail}) — compact the session (/compact), start a new one, or set"
                " STEERABLE_CONTEXT_WINDOW to the server's real window",
            )
        tries = attempts(attempt)
        if status in (401, 403):
            return ProviderError(
                "auth_failed",
                f"{base} refused the API key (HTTP {status}: {detail}) — set STEERABLE_API_KEY"
                " to a valid key",
            )
        if status == 404:
            return ProviderError(
                "model_not_found",
                f"{base} has no model {self.config.model!r} or no /chat/completions endpoint"
                f" (HTTP 404: {detail}) — check --model openai:NAME and STEERABLE_BASE_URL",
            )
        if status == 429:
            return RetryableError(
                "rate_limited",
                f"{base} is rate limiting requests{tries} (HTTP 429: {detail}) — wait and send"
                " the prompt again, or check your plan's limits",
                retry_after(reply),
            )
        if status in _RETRY_STATUS:
            return RetryableError(
                "server_error",
                f"{base} failed{tries} (HTTP {status}: {detail}) — the model server is in"
                " trouble; check its log or try again later",
                retry_after(reply),
            )
        return ProviderError(
            "bad_request",
            f"{base} rejected the request (HTTP {status}: {detail}) — check that the model"
            " supports this request (tools, images) and the server's log",
        )


def _error_text(value: Any) -> str:
    """The human part of an OpenAI-style error body, shortened."""
    if isinstance(value, dict):
        inner = value.get("error", value)
        value = (inner.get("message") or json.dumps(inner)) if isinstance(inner, dict) else inner
    text = scrub(" ".join(str(value).split()))
    return (text[:300] + "...") if len(text) > 300 else (text or "no detail")


def register(router: ModelRouter) -> None:
    """Offer `openai:NAME` routes, configured from the environment when resolved."""

    def factory(model: str) -> OpenAICompatProvider:
        # The router keeps this provider for the route and closes it (`aclose`) on shutdown.
        return OpenAICompatProvider(config_from_env(model))

    router.register("openai", factory)
