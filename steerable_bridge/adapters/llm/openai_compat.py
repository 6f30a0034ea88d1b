"""The OpenAI-compatible model provider: streaming Chat Completions over httpx.

Works with OpenAI and with the servers that speak its API — Ollama, vLLM, llama.cpp,
LM Studio. Selected as `--model openai:NAME`; configured by `STEERABLE_BASE_URL` (falls back
to `OPENAI_BASE_URL`, default `https://api.openai.com/v1`), `STEERABLE_API_KEY` (falls back
to `OPENAI_API_KEY`; not needed when the base URL is loopback), `STEERABLE_MODEL_IMAGES`
(`0` for text-only models) and `STEERABLE_CONTEXT_WINDOW`. What every HTTP provider
shares — one pooled client, retries before the first chunk, deadlines, the event loop and
its errors — is `http_stream.HttpStreamProvider`; this module supplies the wire's headers,
body, decoder (`openai_wire.py`: each event's `data` is one JSON chunk, or `[DONE]`), its
mid-stream `error` events and its mapping of HTTP statuses to errors, and asks the server
for the model's context window (`window.py`). The headers and the status mapping are
`OpenAIStyleProvider`'s, which the Responses API provider (`openai_responses.py`) shares.
Error codes: auth_required, auth_failed, model_not_found, bad_request, context_overflow
(recognised in `overflow.py`), rate_limited, server_error, connection_failed,
connect_timeout, read_timeout, model_timeout (`deadlines.py`), connection_lost,
invalid_response, provider_error, stream_incomplete, http_error.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

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
    StreamDecoder,
    bearer_headers,
    is_loopback,
    require_model,
)
from steerable_bridge.adapters.llm.openai_body import BodyEncoder
from steerable_bridge.adapters.llm.openai_wire import ChunkDecoder, request_body
from steerable_bridge.adapters.llm.overflow import is_context_overflow
from steerable_bridge.adapters.llm.retrying import RetryableError
from steerable_bridge.adapters.llm.window import WindowCache, probe_window, window_from_env
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.ports.model import (
    CONTEXT_OVERFLOW,
    ModelChunk,
    ModelRequest,
    ProviderError,
)

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAICompatProvider",
    "OpenAIConfig",
    "OpenAIStyleProvider",
    "config_from_env",
    "factory",
    "is_loopback",
    "openai_status_error",
    "register",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
WINDOWS = WindowCache()
"""Context windows found per (base URL, model), shared by every provider of the process."""
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIConfig(HttpConfig):
    """Where and how to call one model (the settings are `HttpConfig`'s). Build it from the
    environment with `config_from_env`."""

    base_url: str = DEFAULT_BASE_URL


def config_from_env(model: str, env: Mapping[str, str] | None = None) -> OpenAIConfig:
    """The config for `openai:MODEL` from environment variables; RouteError on a bad value."""
    env = os.environ if env is None else env
    require_model("openai", model, "openai:gpt-4o-mini, or openai:llama3.2 with Ollama")
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
    return OpenAIConfig(
        model=model,
        base_url=base_url,
        api_key=api_key,
        accepts_images=images in ("1", "true", "yes"),
        context_window=window_from_env(env),
    )


C = TypeVar("C", bound=HttpConfig)
D = TypeVar("D", bound=StreamDecoder)


class OpenAIStyleProvider(HttpStreamProvider[C, D]):
    """What the two OpenAI APIs share (Chat Completions here, the Responses API in
    `openai_responses.py`): bearer auth, the status mapping of `openai_status_error`, and
    the words for a context overflow reported mid-stream (`overflowed`)."""

    def headers(self) -> dict[str, str]:
        return bearer_headers(self.config.api_key)

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

    @staticmethod
    def overflowed(detail: str) -> ProviderError:
        """The error for a mid-stream error event that says the request is too long."""
        return ProviderError(
            CONTEXT_OVERFLOW,
            f"the model server says the request does not fit the context window: {detail}"
            " — compact the session (/compact) or start a new one",
        )


class OpenAICompatProvider(OpenAIStyleProvider[OpenAIConfig, ChunkDecoder]):
    """A `ModelProvider` over `/chat/completions` with `stream: true` (see `http_stream.py`
    for the pooled client, retries and deadlines it shares with every HTTP provider, and a
    usage example)."""

    prefix = "openai"
    path = "/chat/completions"
    done_marker = "[DONE]"
    remedies = Remedies(
        endpoint="check that STEERABLE_BASE_URL points at an OpenAI-compatible /v1 endpoint",
        unreachable="start the model server or set STEERABLE_BASE_URL",
        slow="the model server may be overloaded or loading the model; try again",
        missing_key="set {key_env} (or point STEERABLE_BASE_URL at a local server such as Ollama)",
        incomplete="; send the prompt again or check the model server's log",
    )

    @classmethod
    def config_from_env(cls, model: str, env: Mapping[str, str] | None) -> OpenAIConfig:
        return config_from_env(model, env)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        config = self.config
        return request_body(request, model=config.model, accepts_images=config.accepts_images)

    _encoder: BodyEncoder | None = None
    """Keeps the history's messages encoded from request to request (built on first use)."""

    def encoded(self, request: ModelRequest) -> bytes:
        if self._encoder is None:
            config = self.config
            self._encoder = BodyEncoder(model=config.model, accepts_images=config.accepts_images)
        return self._encoder.encode(request)

    def decoder(self) -> ChunkDecoder:
        return ChunkDecoder()

    async def discover_window(self) -> int | None:
        """The route's context window: `STEERABLE_CONTEXT_WINDOW`, else what the server
        reports (asked once per base URL and model per process, see `window.py`)."""
        config = self.config
        if config.context_window is not None or config.needs_key:
            return self._info.context_window
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        client = await self.http.client()
        key = (config.base_url, config.model)

        async def probe() -> int | None:
            window, guessed = await probe_window(
                client, config.base_url, config.model, headers=headers
            )
            if guessed:
                WINDOWS.guessed.add(key)
            return window

        window = await WINDOWS.get(key, probe)
        guessed = key in WINDOWS.guessed
        info = self._info
        if window != info.context_window or guessed != info.window_guessed:
            self._info = dataclasses.replace(info, context_window=window, window_guessed=guessed)
        return window

    def feed(self, decoder: ChunkDecoder, payload: dict[str, Any], tries: int) -> list[ModelChunk]:
        error = payload.get("error")
        if error and is_context_overflow(0, payload):
            raise self.overflowed(_error_text(error))
        if error:
            raise ProviderError(
                "provider_error",
                f"the model server reported an error mid-stream: {_error_text(error)}",
            )
        return decoder.feed(payload)


def openai_status_error(
    reply: httpx.Response, tries: int, *, base_url: str, route: str, model: str, path: str
) -> ProviderError:
    """The error for an OpenAI-style reply other than 200 on try `tries` (0-based): `route`
    and `path` name what to check on a 404 (`openai:NAME`, `/chat/completions`)."""
    status = reply.status_code
    body = json_or_text(reply)
    detail = _error_text(body)
    base = base_url
    if is_context_overflow(status, body):
        return ProviderError(
            CONTEXT_OVERFLOW,
            f"the request does not fit {model!r}'s context window (HTTP {status}:"
            f" {detail}) — compact the session (/compact), start a new one, or set"
            " STEERABLE_CONTEXT_WINDOW to the server's real window",
        )
    after = attempts(tries)
    if status in (401, 403):
        return ProviderError(
            "auth_failed",
            f"{base} refused the API key (HTTP {status}: {detail}) — set STEERABLE_API_KEY"
            " to a valid key",
        )
    if status == 404:
        return ProviderError(
            "model_not_found",
            f"{base} has no model {model!r} or no {path} endpoint"
            f" (HTTP 404: {detail}) — check --model {route} and STEERABLE_BASE_URL",
        )
    if status == 429:
        return RetryableError(
            "rate_limited",
            f"{base} is rate limiting requests{after} (HTTP 429: {detail}) — wait and send"
            " the prompt again, or check your plan's limits",
            retry_after(reply),
        )
    if status in _RETRY_STATUS:
        return RetryableError(
            "server_error",
            f"{base} failed{after} (HTTP {status}: {detail}) — the model server is in"
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
    return shortened(value)


factory = OpenAICompatProvider.factory
"""`factory(env, deadlines)`: builds the `openai:NAME` provider of a route."""
register = OpenAICompatProvider.register
"""`register(router, env, deadlines)`: offers `openai:NAME` routes on `router`."""
