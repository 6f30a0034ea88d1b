"""What every HTTP model adapter reads from a reply: events, error bodies, retry hints, causes.

The OpenAI-compatible and Anthropic providers speak different JSON but meet the same HTTP:
an SSE body parsed by httpx-sse, error bodies that may or may not be JSON, a `retry-after`
header, transport errors whose cause is buried in a chain, and a stream that must be read to
its end so the pooled connection can be reused. Those readings live here once; each
provider keeps only what is its own (its wire, its status mapping, the remedy it names).
Pure helpers: no client, no retries, no logging.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from steerable_bridge.runtime.encoding.surrogates import scrub
from steerable_bridge.runtime.ports.model import ProviderError

if TYPE_CHECKING:  # httpx and httpx-sse load with the first call, not with a provider module
    import httpx

    from steerable_bridge.adapters.llm.deadlines import CallClock

__all__ = [
    "DRAIN_S",
    "attempts",
    "backoff_delay",
    "drain",
    "json_or_text",
    "posted_events",
    "retry_after",
    "shortened",
    "sse_data",
    "transport_error",
    "transport_reason",
]

DRAIN_S = 1.0
"""How long to read past a stream's last event so its connection returns to the pool."""


async def sse_data(reply: httpx.Response, *, base_url: str, hint: str) -> AsyncIterator[str]:
    """The `data` of each server-sent event; a body that is no event stream fails with `hint`
    (what the user should check) named in the error."""
    from httpx_sse import EventSource, SSEError

    try:
        async for event in EventSource(reply).aiter_sse():
            if event.data:
                yield event.data
    except SSEError as error:
        raise ProviderError(
            "invalid_response",
            f"{base_url} did not answer with an event stream ({error}); {hint}",
        ) from None


_JSON = {"content-type": "application/json"}


@asynccontextmanager
async def posted_events(
    client: httpx.AsyncClient,
    url: str,
    *,
    body: bytes,
    headers: dict[str, str],
    refuse: Callable[[httpx.Response], ProviderError],
    base_url: str,
    hint: str,
    clock: CallClock,
) -> AsyncIterator[AsyncIterator[str]]:
    """POST `body` (JSON, encoded) and give the reply's event `data` (see `sse_data`); a reply other
    than 200 is read whole and raised as `refuse(reply)`. Every network wait is made within
    `clock`'s deadlines (`deadlines.py`)."""
    import httpx

    async with AsyncExitStack() as stack:
        request = client.stream("POST", url, content=body, headers={**headers, **_JSON})
        reply = await clock.enter(request, stack)
        assert isinstance(reply.stream, httpx.AsyncByteStream)  # an AsyncClient's reply
        reply.stream = clock.bound(reply.stream)
        if reply.status_code != 200:
            await reply.aread()
            raise refuse(reply)
        yield sse_data(reply, base_url=base_url, hint=hint)


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


def shortened(value: object) -> str:
    """`value` as one line for an error message: white space folded, lone surrogates
    replaced, at most 300 characters (then "..."), "no detail" when empty."""
    text = scrub(" ".join(str(value).split()))
    return (text[:300] + "...") if len(text) > 300 else (text or "no detail")


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


def transport_error(
    error: httpx.HTTPError, *, base_url: str, unreachable_hint: str, may_retry: bool
) -> ProviderError | None:
    """The `ProviderError` for a transport failure (not a timeout), or None to retry.

    A broken connection is retried when `may_retry` (nothing was yielded yet and tries
    remain); everything else fails at once. `unreachable_hint` is what the user should check
    ("start the model server or set STEERABLE_BASE_URL").
    """
    import httpx

    reason = transport_reason(error)
    if isinstance(error, httpx.ConnectError):
        return ProviderError(
            "connection_failed", f"could not reach {base_url}: {reason} — {unreachable_hint}"
        )
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        if may_retry:
            return None
        return ProviderError(
            "connection_lost",
            f"the connection to {base_url} broke mid-answer ({reason}); send the prompt again",
        )
    return ProviderError(
        "http_error", f"the request to {base_url} failed: {reason} — {unreachable_hint}"
    )


def backoff_delay(attempt: int, *, base_s: float, cap_s: float, hint_s: float | None) -> float:
    """Seconds to wait before retry `attempt` (1-based): exponential, at least the server's
    `retry-after` hint, at most `cap_s`."""
    delay: float = base_s * 2.0 ** (attempt - 1)
    if hint_s is not None:
        delay = max(delay, hint_s)
    return min(delay, cap_s)
