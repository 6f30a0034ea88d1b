"""What every HTTP model adapter reads from a reply: events, error bodies, retry hints, causes.

The OpenAI-compatible and Anthropic providers speak different JSON but meet the same HTTP:
an SSE body parsed by httpx-sse, error bodies that may or may not be JSON, a `retry-after`
header, transport errors whose cause is buried in a chain, and a stream that must be read to
its end so the pooled connection can be reused. Those readings live here once; each
provider keeps only what is its own (its wire, its status mapping, the remedy it names).
Pure helpers: no client, no retries, no logging.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from httpx_sse import EventSource, SSEError

from steerable_bridge.runtime.model import ProviderError

__all__ = [
    "DRAIN_S",
    "attempts",
    "drain",
    "json_or_text",
    "retry_after",
    "sse_data",
    "transport_reason",
]

DRAIN_S = 1.0
"""How long to read past a stream's last event so its connection returns to the pool."""


async def sse_data(reply: httpx.Response, *, base_url: str, hint: str) -> AsyncIterator[str]:
    """The `data` of each server-sent event; a body that is no event stream fails with `hint`
    (what the user should check) named in the error."""
    try:
        async for event in EventSource(reply).aiter_sse():
            if event.data:
                yield event.data
    except SSEError as error:
        raise ProviderError(
            "invalid_response",
            f"{base_url} did not answer with an event stream ({error}); {hint}",
        ) from None


async def drain(events: AsyncIterator[str]) -> None:
    """Read what follows the last event (usually just the end of the body), briefly, so the
    connection goes back to the pool instead of being closed half-read."""
    with anyio.move_on_after(DRAIN_S):
        async for _ in events:
            pass


def attempts(attempt: int) -> str:
    """ " after N attempts" for an error raised on retry `attempt` (0-based), else ""."""
    return f" after {attempt + 1} attempts" if attempt else ""


def json_or_text(reply: httpx.Response) -> Any:
    """The reply's JSON body, or its text when it is not JSON."""
    try:
        return reply.json()
    except ValueError:
        return reply.text


def retry_after(reply: httpx.Response) -> float | None:
    """The `retry-after` header in seconds (never negative), or None when absent or a date."""
    raw = reply.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


def transport_reason(error: BaseException) -> str:
    """A short cause for a transport error ("connection refused", "unknown host", ...)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, ConnectionResetError):
            return "connection reset"
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    if "Name or service not known" in text or "nodename" in text or "getaddrinfo" in text:
        return "unknown host"
    return text or type(error).__name__
