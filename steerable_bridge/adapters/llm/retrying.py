"""Retrying a streamed model call: the one attempt loop every HTTP provider runs.

A provider describes one attempt as an async iterator (open the stream, check the status,
decode events, yield chunks and finally the `ModelResponse`) and hands it to
`stream_with_retries` with its `RetryPolicy`. The loop is the same for every wire: a
failure is retried only while nothing has been yielded yet (a half-streamed answer cannot be
taken back) and tries remain, and only when it is worth it — a `RetryableError` (rate
limits, overload, 5xx; it may carry the server's `retry-after`), or a connection that broke
before the first chunk. The wait grows exponentially, never below the server's hint nor
above the policy's cap. Timeouts are not retried: they already waited a full bound, and the
error names the remedy. Everything else from httpx becomes a `ProviderError` through
`http_replies.transport_error`. The whole loop runs under the call's two deadlines
(`deadlines.py`: the whole call, and the idle wait for the next token, restarted for each
try): each attempt gets the call's `CallClock` for its network waits, progress items restart
the idle wait, and a retry whose back-off would end past
the call's deadline is not made — the failure is raised instead, so a call never outlives
its deadline by retrying.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from steerable_bridge.adapters.llm.deadlines import CallClock, CallDeadlines, is_progress
from steerable_bridge.adapters.llm.http_replies import backoff_delay, transport_error
from steerable_bridge.runtime.ports.model import ProviderError

if TYPE_CHECKING:
    import httpx

__all__ = ["RetryPolicy", "RetryableError", "stream_with_retries"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryableError(ProviderError):
    """A failure worth another attempt, with the server's `retry-after` (seconds) if any."""

    def __init__(self, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(code, message, retryable=True)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to retry one provider's calls, and what to tell the user."""

    base_url: str
    max_retries: int
    backoff_s: float
    max_backoff_s: float
    connect_timeout_s: float
    read_timeout_s: float
    unreachable_hint: str
    """What to check when the server cannot be reached or connected to in time."""
    slow_hint: str
    """What to make of a server that sent nothing for `read_timeout_s`."""
    deadlines: CallDeadlines = CallDeadlines()
    """The whole call's deadline and the idle wait for the next token (`deadlines.py`)."""

    def timeout_error(self, error: httpx.TimeoutException) -> ProviderError:
        """The error for a connect (or pool) timeout, or for a read that waited too long."""
        import httpx

        if isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout):
            return ProviderError(
                "connect_timeout",
                f"could not connect to {self.base_url} within {self.connect_timeout_s:g}s"
                f" — {self.unreachable_hint}",
                retryable=True,
            )
        return ProviderError(
            "read_timeout",
            f"{self.base_url} sent nothing for {self.read_timeout_s:g}s — {self.slow_hint}",
            retryable=True,
        )


async def stream_with_retries(
    attempt: Callable[[int, CallClock], AsyncGenerator[T, None]], policy: RetryPolicy
) -> AsyncGenerator[T, None]:
    """What `attempt(n, clock)` yields, for the first try `n` (0-based) that does not fail
    retryably before yielding; the last failure is raised when tries run out. Each try's
    generator is closed as soon as it ends or the caller stops reading, so its connection is
    released at once."""
    import httpx  # loaded with the first call, not when a provider module is imported

    tries = 0
    clock = CallClock(policy.deadlines, base_url=policy.base_url)
    while True:
        yielded = False
        wait_hint: float | None = None
        clock.restart_idle()
        try:
            async with aclosing(attempt(tries, clock)) as items:
                async for item in items:
                    if is_progress(item):
                        clock.restart_idle()
                    yielded = True
                    yield item
            return
        except ProviderError as error:
            if yielded or not error.retryable or tries >= policy.max_retries:
                raise
            wait_hint = error.retry_after if isinstance(error, RetryableError) else None
            failure: ProviderError = error
        except httpx.TimeoutException as error:
            raise policy.timeout_error(error) from None
        except httpx.HTTPError as error:
            may_retry = not yielded and tries < policy.max_retries
            found = transport_error(
                error,
                base_url=policy.base_url,
                unreachable_hint=policy.unreachable_hint,
                may_retry=may_retry,
            )
            if found is not None:
                raise found from None
            failure = ProviderError(
                "connection_lost",
                f"the connection to {policy.base_url} broke before the answer started;"
                " send the prompt again",
            )
        tries += 1
        delay = backoff_delay(
            tries, base_s=policy.backoff_s, cap_s=policy.max_backoff_s, hint_s=wait_hint
        )
        if delay >= clock.remaining():
            log.warning(
                "%s: attempt %d failed and the call's deadline leaves no time to retry",
                policy.base_url,
                tries,
            )
            raise failure from None
        log.warning("%s: attempt %d failed, retrying in %.1f s", policy.base_url, tries, delay)
        await anyio.sleep(delay)
