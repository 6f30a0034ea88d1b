"""One streamed HTTP model call, written once: the base every HTTP model provider subclasses.

`HttpStreamProvider` owns what every wire shares: the pooled client (`http_client.py`,
built on first use, kept across steps and turns, closed by `aclose()`), the refusal of a
call that needs a key and has none, the POST that reads the reply's server-sent events
(`http_replies.posted_events`), the bounded retries before the first chunk
(`retrying.py`), the call's two deadlines (`deadlines.py`), the JSON parse of each event
and the `invalid_response` errors for what does not parse or has an unexpected shape, the
drain that hands the connection back to the pool, the count of repaired surrogates, the
`stream_incomplete` check, the closing `ModelResponse`, and the route's `factory` /
`register`. `HttpConfig` holds the settings every provider has (model, base URL, key,
images, window, retries, timeouts, deadlines). A provider supplies only what is its own:
its route `prefix`, endpoint `path` and `Remedies` (what its errors tell the user to
check), `config_from_env`, `headers()`, `body(request)`, a stream `decoder()` (a
`StreamDecoder`: `feed(payload)` → chunks, `flush()`, and the finish reason, usage, model,
surrogate count and end event it saw), how a mid-stream error event fails (`feed`, with
`failed_mid_stream` for the words), how the answer ends (a `done_marker` data line such as
OpenAI's `[DONE]`, else the decoder's `stopped` after an end event such as Anthropic's
`message_stop`) and `status_error(reply, tries)`, its mapping of a non-200 reply to a
`ProviderError` (a `RetryableError` when another try is worth it). **To add a provider**
(Gemini, say): write its payload mapping (`*_wire.py`: request body, event decoder) and
one module of about 150 lines — a frozen `HttpConfig` subclass with its defaults, a
`config_from_env` that reads its variables and raises `RouteError` naming a bad one
(`require_model` refuses a route without a model name), the `HttpStreamProvider` subclass
with the hooks above, and `factory = TheProvider.factory`, `register =
TheProvider.register`; add its module to `HTTP_PROVIDERS` in `commands/model_routes.py` (the
CLI calls its `register` when the first route of its prefix resolves); test it against a
local fake server (`tests/adapters/llm/test_http_stream.py` shows a whole provider in 60
lines). Never logs request bodies or headers (keys travel in headers).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar
from urllib.parse import urlsplit

from steerable_bridge.adapters.llm.deadlines import CallClock, CallDeadlines
from steerable_bridge.adapters.llm.http_replies import attempts, drain, posted_events
from steerable_bridge.adapters.llm.retrying import RetryableError, RetryPolicy, stream_with_retries
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter, ProviderFactory, RouteError
from steerable_bridge.runtime.ports.model import (
    FinishReason,
    ModelChunk,
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
)
from steerable_bridge.runtime.values import Usage

if TYPE_CHECKING:  # httpx loads when the first provider is built (`http_client.py`)
    import httpx

__all__ = [
    "HttpConfig",
    "HttpStreamProvider",
    "Remedies",
    "StreamDecoder",
    "bearer_headers",
    "is_loopback",
    "require_model",
]

log = logging.getLogger(__name__)


def is_loopback(url: str) -> bool:
    """True for http(s)://localhost, 127.x.x.x and [::1] URLs."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_model(prefix: str, model: str, example: str) -> None:
    """Refuse route `PREFIX:` or `PREFIX:default` (no model name), naming `example` (one or
    more routes to try) in the remedy."""
    if not model or model == "default":
        raise RouteError(
            "missing_model",
            f"the {prefix} provider needs a model name: use --model {prefix}:NAME"
            f" (for example {example})",
        )


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """Headers asking for an event stream, with `Authorization: Bearer KEY` when there is a
    key (the OpenAI-style wires)."""
    headers = {"Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig:
    """Where and how to call one model over HTTP; a provider subclasses it with its defaults
    (`base_url`, `key_env`, `context_window`) and adds its own settings."""

    model: str
    base_url: str
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

    def with_deadlines(self, deadlines: CallDeadlines | None) -> Self:
        """This config bounded by `deadlines` (unchanged when None); httpx's read timeout is
        raised to the idle deadline so it never cuts a wait the deadline allows."""
        if deadlines is None:
            return self
        return dataclasses.replace(
            self, deadlines=deadlines, read_timeout_s=max(self.read_timeout_s, deadlines.idle_s)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Remedies:
    """What a provider's errors tell the user to do or check."""

    endpoint: str
    """A reply that is no event stream, or an event that does not decode ("check that ...")."""
    unreachable: str
    """A server that cannot be reached or connected to in time."""
    slow: str
    """A server that sent nothing for the read timeout."""
    missing_key: str
    """Follows "BASE needs an API key: "; `{key_env}` stands for the config's `key_env`."""
    incomplete: str
    """Follows "BASE closed the stream before the answer finished"."""


class StreamDecoder(Protocol):
    """A wire's event decoder (`openai_wire.ChunkDecoder`, `anthropic_wire.EventDecoder`)."""

    finish_reason: FinishReason | None
    stopped: bool
    """Whether it saw the wire's end event (`message_stop`); stays False on a wire whose
    answer ends with the provider's `done_marker`."""

    @property
    def model(self) -> str | None: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def replaced_surrogates(self) -> int: ...

    def feed(self, data: dict[str, Any]) -> list[ModelChunk]: ...

    def flush(self) -> list[ModelChunk]: ...


C = TypeVar("C", bound=HttpConfig)
D = TypeVar("D", bound=StreamDecoder)


class HttpStreamProvider(ABC, Generic[C, D]):
    """A `ModelProvider` that POSTs one JSON body and reads the answer as server-sent events.

    `transport` replaces httpx's network transport (tests pass `httpx.MockTransport`).
    Every `stream()` reuses the provider's one pooled client; `aclose()` closes it.

        provider = SomeProvider(config_from_env("model-name"))
        async for item in provider.stream(request):
            ...
        await provider.aclose()
    """

    prefix: ClassVar[str]
    """The route prefix: `openai` in `openai:gpt-4o`."""
    path: ClassVar[str]
    """The streaming endpoint below the base URL."""
    remedies: ClassVar[Remedies]
    accepts_documents: ClassVar[bool] = False
    done_marker: ClassVar[str | None] = None
    """A `data` line, not JSON, that ends the answer (OpenAI's `[DONE]`); None when the
    answer ends with an event the decoder sees (its `stopped`, see `ended`)."""

    def __init__(self, config: C, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        from steerable_bridge.adapters.llm.http_client import HttpSettings, PooledClient

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
            unreachable_hint=self.remedies.unreachable,
            slow_hint=self.remedies.slow,
        )
        self._info = ModelInfo(
            route=f"{self.prefix}:{config.model}",
            context_window=config.context_window,
            accepts_images=config.accepts_images,
            accepts_documents=self.accepts_documents,
            needs_api_key_env=config.key_env if config.needs_key else None,
        )
        self._headers = self.headers()

    # -- what a provider supplies ------------------------------------------------------------

    @classmethod
    @abstractmethod
    def config_from_env(cls, model: str, env: Mapping[str, str] | None) -> C:
        """The config for route `PREFIX:model` read from `env` (the process environment when
        None); `RouteError` names a bad value."""

    @abstractmethod
    def headers(self) -> dict[str, str]:
        """The request headers (accept, auth, version); built once per provider."""

    @abstractmethod
    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body `stream(request)` sends."""

    def encoded(self, request: ModelRequest) -> bytes:
        """`body(request)` as the bytes sent (as httpx's `json=` writes it); a provider may
        keep what repeats from request to request encoded (`openai_body.py`)."""
        body = self.body(request)
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

    @abstractmethod
    def decoder(self) -> D:
        """A fresh decoder for one attempt's events."""

    @abstractmethod
    def status_error(self, reply: httpx.Response, tries: int) -> ProviderError:
        """The error for a reply other than 200 (read whole) on try `tries` (0-based)."""

    def feed(self, decoder: D, payload: dict[str, Any], tries: int) -> list[ModelChunk]:
        """The chunks of one event's JSON object; a provider overrides this to fail on its
        wire's mid-stream error events. An `AttributeError`, `TypeError` or `ValueError`
        raised here becomes `invalid_response`."""
        return decoder.feed(payload)

    def ended(self, decoder: D) -> bool:
        """Whether the decoder saw the answer's last event (reading stops there)."""
        return decoder.stopped

    def failed_mid_stream(
        self, kind: str, message: str, tries: int, *, retry_as: str | None, code: str
    ) -> ProviderError:
        """The error for the wire's failure event `kind` on try `tries` (0-based): a
        `RetryableError` `retry_as` when the service was only busy (tried again before the
        first chunk), else a `ProviderError` `code`."""
        base = self.config.base_url
        if retry_as is not None:
            return RetryableError(
                retry_as,
                f"{base} failed mid-stream ({kind}: {message}){attempts(tries)} — the service"
                " is busy; send the prompt again later",
            )
        return ProviderError(code, f"{base} reported an error mid-stream ({kind}: {message})")

    # -- routes ------------------------------------------------------------------------------

    @classmethod
    def factory(
        cls, env: Mapping[str, str] | None = None, deadlines: CallDeadlines | None = None
    ) -> ProviderFactory:
        """Builds the provider of a route `PREFIX:model`, configured from `env` (the process
        environment when None) and bounded by `deadlines` (`CallDeadlines()` when None)."""

        def build(model: str) -> HttpStreamProvider[C, D]:
            # The router keeps this provider for the route and closes it on shutdown.
            return cls(cls.config_from_env(model, env).with_deadlines(deadlines))

        return build

    @classmethod
    def register(
        cls,
        router: ModelRouter,
        env: Mapping[str, str] | None = None,
        deadlines: CallDeadlines | None = None,
    ) -> None:
        """Offer `PREFIX:model` routes on `router`, configured when resolved (`factory`)."""
        router.register(cls.prefix, cls.factory(env, deadlines))

    # -- the call ----------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def url(self) -> str:
        return f"{self.config.base_url}{self.path}"

    async def aclose(self) -> None:
        """Close the pooled client and its connections."""
        await self.http.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        config = self.config
        if config.needs_key:
            remedy = self.remedies.missing_key.format(key_env=config.key_env)
            raise ProviderError("auth_required", f"{config.base_url} needs an API key: {remedy}")
        body = self.encoded(request)
        client = await self.http.client()
        attempt = partial(self._attempt, client, body)
        async for item in stream_with_retries(attempt, self._retry):
            yield item

    async def _attempt(
        self, client: httpx.AsyncClient, body: bytes, tries: int, clock: CallClock
    ) -> AsyncGenerator[ModelStreamItem, None]:
        """One try: the answer's chunks, then its `ModelResponse`."""
        config = self.config
        decoder = self.decoder()
        async with posted_events(
            client,
            self.url,
            body=body,
            headers=self._headers,
            refuse=lambda reply: self.status_error(reply, tries),
            clock=clock,
            base_url=config.base_url,
            hint=self.remedies.endpoint,
        ) as events:
            marker, decode, ended = self.done_marker, self._decode, self.ended  # per event
            async for data in events:
                if data == marker:
                    if decoder.finish_reason is None:
                        decoder.finish_reason = "end_turn"  # some servers omit it before [DONE]
                    await drain(events)
                    break
                for chunk in decode(decoder, data, tries):
                    yield chunk
                if ended(decoder):
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
        unended = self.done_marker is None and not self.ended(decoder)
        if decoder.finish_reason is None or unended:
            raise ProviderError(
                "stream_incomplete",
                f"{config.base_url} closed the stream before the answer finished"
                f"{self.remedies.incomplete}",
            )
        yield ModelResponse(
            finish_reason=decoder.finish_reason,
            usage=decoder.usage,
            model=decoder.model or config.model,
            replaced_surrogates=replaced,
        )

    def _decode(self, decoder: D, data: str, tries: int) -> list[ModelChunk]:
        try:
            payload = json.loads(data)
        except ValueError:
            raise self._undecodable("that is not JSON", data) from None
        if not isinstance(payload, dict):
            return []
        try:
            return self.feed(decoder, payload, tries)
        except (AttributeError, TypeError, ValueError) as err:  # a shape the decoder missed
            raise self._undecodable(f"of an unexpected shape ({err})", data) from None

    def _undecodable(self, what: str, data: str) -> ProviderError:
        return ProviderError(
            "invalid_response",
            f"{self.config.base_url} sent a stream event {what}: {data[:200]!r};"
            f" {self.remedies.endpoint}",
        )
