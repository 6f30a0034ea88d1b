"""The AG-UI endpoint a bridge drives: its URL, headers, one pooled HTTP client, one run's SSE.

`AguiEndpoint(settings)` is built once per process (`acp --agui-url URL`). It is also the
model route the bridged sessions name (`agui:<host>/<path>`): the router hands it out as the
route's provider, so `info` describes the endpoint to the ACP transport and `aclose()` — run
by the router when the agent shuts down — closes its connection pool. Its `stream` (the
model-provider call) is never used, since a bridged turn calls no model here, and raises a
clear `ProviderError` if anything ever does. `run(run_input, handle)` POSTs one
`RunAgentInput` and hands each event of the SSE answer (read by `sse.py`), validated with
the official `ag_ui.core` models, to `handle` until that returns True (the run's RUN_FINISHED /
RUN_ERROR) or the stream ends. Legacy THINKING_* events (AG-UI before 1.0) are read as the
REASONING_* events that replaced them; an event of a type the SDK does not know, or one its
model rejects, is logged at debug level and skipped, so a newer or sloppier server still
gets through. Every failure is a `BridgeError` with a stable code and a remedy: the server
cannot be reached (`agui_unreachable`), answers non-2xx or not SSE (`agui_bad_response`),
sends nothing for `idle_timeout_s` (`agui_stalled`) or drops the stream (`agui_disconnected`).
The overall deadline of a run is the engine's (`engine.py`). No LoopEvents here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from ag_ui.core import BaseEvent, Event, RunAgentInput
from httpx_sse import aconnect_sse
from pydantic import TypeAdapter, ValidationError

from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelStreamItem,
    ProviderError,
)
from steerable_bridge.transports.agui.bridge.sse import sse_batches

__all__ = [
    "AguiEndpoint",
    "BridgeError",
    "EndpointSettings",
    "parse_header",
]

log = logging.getLogger(__name__)

_EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
"""Validates one AG-UI event (any of the SDK's types, by `type`); built once."""

ERROR_BODY_BYTES = 2048
"""How much of a non-2xx answer's body the error quotes."""

_LEGACY: dict[str, str] = {
    "THINKING_START": "REASONING_START",
    "THINKING_END": "REASONING_END",
    "THINKING_TEXT_MESSAGE_START": "REASONING_MESSAGE_START",
    "THINKING_TEXT_MESSAGE_CONTENT": "REASONING_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_END": "REASONING_MESSAGE_END",
}
"""AG-UI 0.x thinking events → the 1.0 reasoning events that replaced them."""

Handle = Callable[[BaseEvent], Awaitable[bool]]
"""Takes one event of the run; True when the run has ended (stop reading)."""


class BridgeError(ProviderError):
    """The AG-UI endpoint failed in a way the user can act on (`code`, `message` = remedy);
    `status` is the HTTP status of a non-2xx answer."""

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(code, message)
        self.status = status


def parse_header(text: str) -> tuple[str, str]:
    """`"Name: value"` → `("Name", "value")`; raises `ValueError` naming the form."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c in name for c in " \t\r\n") or "\n" in value:
        raise ValueError(f'--agui-header {text!r} must look like "Name: value"')
    return name, value


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSettings:
    """Where the endpoint is and how long each wait on it may take."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 120.0
    """The longest the server may send nothing (SSE keep-alive comments count)."""
    run_timeout_s: float = 900.0
    """The longest one AG-UI run may stream, start to end."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"--agui-url {self.url!r} is not an http(s) URL; pass the endpoint that takes"
                " POST RunAgentInput, e.g. http://127.0.0.1:8000/agent"
            )
        for value in (self.connect_timeout_s, self.idle_timeout_s, self.run_timeout_s):
            if value <= 0:
                raise ValueError("AG-UI bridge timeouts must be positive numbers of seconds")

    @property
    def route(self) -> str:
        """The model route bridged sessions name: `agui:<host[:port]>[/path]`."""
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        return f"agui:{parts.netloc}{path}"


class AguiEndpoint:
    """One AG-UI endpoint and its pooled client (see the module docstring)."""

    def __init__(self, settings: EndpointSettings, *, client: httpx.AsyncClient | None = None):
        self.settings = settings
        self.url = settings.url
        self._client = client or httpx.AsyncClient(
            headers=dict(settings.headers),
            timeout=httpx.Timeout(
                connect=settings.connect_timeout_s,
                read=settings.idle_timeout_s,
                write=settings.connect_timeout_s,
                pool=settings.connect_timeout_s,
            ),
            follow_redirects=False,
        )
        self._info = ModelInfo(route=settings.route, accepts_images=True)

    # -- as a model route -----------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        return self._info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        raise ProviderError(
            "bridge_route",
            f"the route {self._info.route} is an AG-UI endpoint served through the bridge;"
            " its turns run on that server, so no model is called here",
        )
        yield  # pragma: no cover - makes this an async generator, as the port expects

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- one run ----------------------------------------------------------------------------------

    async def run(self, run_input: RunAgentInput, handle: Handle) -> bool:
        """Stream one run into `handle`; True when `handle` saw the run end, False when the
        stream ended first. Raises `BridgeError`."""
        body = run_input.model_dump_json(by_alias=True, exclude_none=True)
        try:
            async with aconnect_sse(
                self._client,
                "POST",
                self.url,
                content=body,
                headers={"Content-Type": "application/json"},
            ) as source:
                await self._check(source.response)
                legacy = _Legacy()
                async with aclosing(sse_batches(source.response)) as batches:
                    async for batch in batches:
                        for data in batch:
                            try:  # the hot path: one validation, no other call
                                event: BaseEvent = _EVENTS.validate_json(data)
                            except ValidationError as error:
                                decoded = _decode(data, legacy, error)
                                if decoded is None:
                                    continue
                                event = decoded
                            if await handle(event):
                                return True
                return False
        except httpx.ConnectError as error:
            raise self._unreachable(error) from None
        except httpx.ConnectTimeout as error:
            raise self._unreachable(error) from None
        except httpx.ReadTimeout:
            raise BridgeError(
                "agui_stalled",
                f"the AG-UI server at {self.url} sent nothing for"
                f" {self.settings.idle_timeout_s:g}s; check that it is working, or allow it"
                " longer with --agui-idle-timeout",
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as error:
            raise BridgeError(
                "agui_disconnected",
                f"the AG-UI server at {self.url} closed the stream mid-run"
                f" ({error or 'no reason'}); check its logs and send the prompt again",
            ) from None
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None

    def _unreachable(self, error: Exception) -> BridgeError:
        reason = str(error) or type(error).__name__
        return BridgeError(
            "agui_unreachable",
            f"cannot reach the AG-UI server at {self.url} ({reason}); start it, or check"
            " --agui-url",
        )

    async def _check(self, response: httpx.Response) -> None:
        status = response.status_code
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if 200 <= status < 300 and content_type == "text/event-stream":
            return
        excerpt = await _excerpt(response)
        if not 200 <= status < 300:
            hint = _AUTH_HINT if status in (401, 403) else _STATUS_HINT
            raise BridgeError(
                "agui_bad_response",
                f"the AG-UI server at {self.url} answered HTTP {status}"
                + (f": {excerpt}" if excerpt else "")
                + f"; {hint}",
                status=status,
            )
        raise BridgeError(
            "agui_bad_response",
            f"the AG-UI server at {self.url} answered {content_type or 'no content type'},"
            " not an event stream (text/event-stream); check that --agui-url is the AG-UI"
            " endpoint that takes POST RunAgentInput (e.g. .../agent), not a page or another API",
        )


_AUTH_HINT = "it wants credentials: pass them with --agui-header 'Authorization: Bearer ...'"
_STATUS_HINT = "check --agui-url and the server's logs"


async def _excerpt(response: httpx.Response) -> str:
    """The start of an error answer's body: its `message` when it is our JSON error shape."""
    data = b""
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= ERROR_BODY_BYTES:
            break
    text = data[:ERROR_BODY_BYTES].decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    if isinstance(parsed, dict):
        for key in ("message", "detail", "error"):
            value = parsed.get(key)
            if isinstance(value, str) and value:
                return value[:300]
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])[:300]
    return " ".join(text.split())[:300]


class _Legacy:
    """Message ids for a pre-1.0 stream's thinking blocks, which had none."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def modernize(self, raw: dict[str, Any]) -> dict[str, Any]:
        kind = str(raw["type"])
        if kind == "THINKING_START":
            self.count += 1
        message_id = f"thinking-{self.count}"
        return {**raw, "type": _LEGACY[kind], "messageId": raw.get("messageId") or message_id}


def _decode(data: str, legacy: _Legacy, error: ValidationError) -> BaseEvent | None:
    """An SSE `data` the SDK's union refused (`error`): the 1.0 event a legacy one stands
    for, or None (logged) when it is not one the SDK knows."""
    try:
        raw = json.loads(data)
    except ValueError:
        log.debug("skipped an SSE message that is not JSON: %.200s", data)
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if isinstance(raw, dict) and kind in _LEGACY:
        try:
            modern: BaseEvent = _EVENTS.validate_python(legacy.modernize(raw))
            return modern
        except ValidationError:
            pass
    log.debug("skipped an AG-UI event the SDK does not accept (%s): %s", kind, error)
    return None
