"""The two deadlines of a streamed model call: the whole call, and the wait for the next token.

httpx's read timeout restarts on every byte, so a server that sends SSE comments (or one byte
a second) forever keeps a call open for ever. `CallClock` bounds a call twice: `call_s` from
the first connect to the last byte, across every retry of `retrying.py`, and `idle_s` since
the last *progress* — a text, reasoning or tool-call delta (`is_progress`); keep-alive
comments, empty deltas and usage-only chunks yield nothing or nothing that counts.
Every network wait of the call is made under whichever deadline comes first: sending the
request and awaiting the response head (`CallClock.enter`) and each read of the body
(`CallClock.bound` wraps the response's byte stream), each in an anyio cancel scope of its
own that is never open across a `yield` (so the consumer's own awaits are never cancelled by
it). The scope is per network read, not per chunk: a fast server's reads carry many chunks,
so the bound costs the per-chunk hot path only the `is_progress` check. A missed deadline
is a `ProviderError` `model_timeout` (not retried) naming the deadline and the setting to
raise; the cancellation has closed the connection, and the attempt's `async with
client.stream(...)` the response. `http_replies.posted_events` applies the clock,
`retrying.stream_with_retries` owns it (one per call, across retries) and restarts the idle
wait on each progress item; the settings come from `commands/model_deadlines.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from steerable_bridge.runtime.ports.model import (
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)

if TYPE_CHECKING:  # httpx loads with the first call (`http_client.py`), not with a route
    import httpx

__all__ = ["MODEL_TIMEOUT", "CallClock", "CallDeadlines", "is_progress"]

T = TypeVar("T")

MODEL_TIMEOUT = "model_timeout"
"""The `run_failed` code of a model call that missed one of its deadlines."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDeadlines:
    """How long one model call may take in all, and wait for its next token (seconds)."""

    call_s: float = 300.0
    """Whole call: connect to last byte, retries and their back-off included."""
    idle_s: float = 120.0
    """Longest stretch without a content, reasoning or tool-call delta."""


def is_progress(item: object) -> bool:
    """Whether a streamed item is a token the idle deadline counts (a non-empty delta)."""
    if isinstance(item, TextChunk):
        return bool(item.delta)
    if isinstance(item, ReasoningChunk):
        return bool(item.delta) or item.signature is not None or item.redacted_data is not None
    if isinstance(item, ToolCallChunk):
        return bool(item.name) or bool(item.arguments_delta)
    return False


Which = Literal["call", "idle"]


class CallClock:
    """One call's two deadlines (see the module docstring); `clock` is injectable for tests."""

    __slots__ = ("_clock", "_end", "_idle_end", "base_url", "deadlines")

    def __init__(
        self,
        deadlines: CallDeadlines,
        *,
        base_url: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deadlines = deadlines
        self.base_url = base_url
        self._clock = clock
        now = clock()
        self._end = now + deadlines.call_s
        self._idle_end = now + deadlines.idle_s

    def remaining(self) -> float:
        """Seconds left of the whole call (never negative)."""
        return max(0.0, self._end - self._clock())

    def restart_idle(self) -> None:
        """A token arrived (or a new attempt starts): the idle wait starts again."""
        self._idle_end = self._clock() + self.deadlines.idle_s

    def wait(self) -> tuple[float, Which]:
        """Seconds until the nearer deadline (never negative), and which one it is."""
        now = self._clock()
        if self._idle_end < self._end:
            return max(0.0, self._idle_end - now), "idle"
        return max(0.0, self._end - now), "call"

    async def enter(self, context: AbstractAsyncContextManager[T], stack: AsyncExitStack) -> T:
        """Enter `context` (a request being sent, its response head awaited) on `stack`
        within the nearer deadline; `ProviderError` `model_timeout` when it passes first."""
        wait, which = self.wait()
        if wait > 0:
            with anyio.move_on_after(wait):
                return await stack.enter_async_context(context)
        raise self.expired(which)

    def bound(self, stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
        """`stream` (a response body), each network read made within the nearer deadline."""
        from steerable_bridge.adapters.llm.http_client import BoundedBody

        return BoundedBody(stream, self)

    def expired(self, which: Which) -> ProviderError:
        """The error for a missed deadline, naming the setting to raise."""
        if which == "idle":
            return ProviderError(
                MODEL_TIMEOUT,
                f"{self.base_url} sent no new token for {self.deadlines.idle_s:g}s (the model"
                " call's idle deadline; keep-alives and empty chunks do not count) — check the"
                " model server, or raise --model-idle-timeout / STEERABLE_MODEL_IDLE_TIMEOUT",
            )
        return ProviderError(
            MODEL_TIMEOUT,
            f"{self.base_url} did not finish the answer within {self.deadlines.call_s:g}s (the"
            " model call's deadline, connect to last byte) — check the model server, or raise"
            " --model-deadline / STEERABLE_MODEL_DEADLINE",
        )
