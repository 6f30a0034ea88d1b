"""The two deadlines of a streamed model call: the whole call, and the wait for the next token.

httpx's read timeout restarts on every byte, so a server that sends SSE comments (or one byte
a second) forever keeps a call open for ever. `CallClock` bounds a call twice: `call_s` from
the first connect to the last byte, across every retry of `retrying.py`, and `idle_s` since
the last *progress* — a text, reasoning or tool-call delta (`is_progress`); keep-alive
comments, empty deltas and usage-only chunks yield nothing or nothing that counts.
`CallClock.next` reads one item of an attempt under whichever deadline comes first, with an
anyio cancel scope around that one read only (never across a `yield`, so the consumer's own
awaits are never cancelled by it); the cancellation unwinds the attempt's generator, whose
`async with client.stream(...)` closes the HTTP response. A missed deadline is a
`ProviderError` `model_timeout` (not retried) naming the deadline and the setting to raise.
Used by `retrying.stream_with_retries`; the settings come from `commands/model_deadlines.py`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import anyio

from steerable_bridge.runtime.model import ProviderError, ReasoningChunk, TextChunk, ToolCallChunk

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

    def _next_wait(self) -> tuple[float, Which]:
        now = self._clock()
        if self._idle_end < self._end:
            return max(0.0, self._idle_end - now), "idle"
        return max(0.0, self._end - now), "call"

    async def next(self, items: AsyncIterator[T]) -> T:
        """The next item of `items` within the nearer deadline; `StopAsyncIteration` at its
        end, `ProviderError` `model_timeout` when the deadline passes first. Progress
        restarts the idle wait."""
        wait, which = self._next_wait()
        with anyio.move_on_after(wait):
            item = await anext(items)
            if is_progress(item):
                self.restart_idle()
            return item
        raise self.expired(which)

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
