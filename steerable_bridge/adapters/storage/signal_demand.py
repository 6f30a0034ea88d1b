"""When a polling signal listener has to look: only while this process holds a claim.

A signal (`runtime/agent_sessions/signals.py`) can only matter to the process running the
session's turn, and a turn runs under the session's claim (`Session.prompt` enters
`claim_session` after it marks itself running and leaves it before it stops), so a process
holding no claim has nothing to deliver a signal to. The SQLite store's `listen` polls its
`signals` table, and a poll made while nothing can use its answer is only periodic work,
whose small allocations land in the memory a burst of runs freed and keep it from going
back to the system. `SignalDemand` counts the claims a process holds and parks its
listeners while there are none: a parked listener waits on an event and allocates
nothing. Entering a claim wakes every parked listener and waits until each has taken its
mark (the newest signal's id) before the claim takes the session's lock, so every signal
published once another process can see the claim lies after the mark and is delivered,
exactly as the first poll of `listen` starts; a signal published while the process held no
claim is skipped, as it was for no turn here. Single event loop per process; a forked
child starts with no claims and no parked listeners. Never used for anything but gating
polls: the lock itself is `ownership.py`'s.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

__all__ = ["SignalDemand"]

T = TypeVar("T")


@dataclass(eq=False)
class _Parked:
    """One listener waiting for a claim: woken by it, then ready once it took its mark."""

    wake: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)


class SignalDemand:
    """The claims this process holds and the listeners parked until one is entered."""

    def __init__(self) -> None:
        self._held = 0
        self._parked: set[_Parked] = set()
        self._pid = os.getpid()

    @property
    def held(self) -> int:
        """How many claims this process holds (entered and not yet left)."""
        self._forked()
        return self._held

    @property
    def parked(self) -> int:
        """How many listeners wait for a claim now (none poll)."""
        self._forked()
        return len(self._parked)

    @asynccontextmanager
    async def claiming(self) -> AsyncIterator[None]:
        """Around a claim, outside its lock: on entering, wake the parked listeners and wait
        until each has its mark; while inside, listeners keep polling."""
        self._forked()
        self._held += 1
        pid = self._pid
        try:
            for parked in list(self._parked):
                parked.wake.set()
                await parked.ready.wait()
            yield
        finally:
            if pid == os.getpid():  # a forked child never held the parent's claim
                self._held -= 1

    async def wait_for_claim(self, mark: Callable[[], Awaitable[T]]) -> T | None:
        """For a listener before each poll: None at once while a claim is held; otherwise
        park until one is entered, then `await mark()` before that claim goes on, and return
        what it gave (where the next poll begins)."""
        self._forked()
        if self._held:
            return None
        parked = _Parked()
        self._parked.add(parked)
        try:
            await parked.wake.wait()
            return await mark()
        finally:
            self._parked.discard(parked)
            parked.ready.set()  # a listener cancelled or failing never holds a claim up

    def _forked(self) -> None:
        """In a forked child: the parent's claims and parked listeners are not this one's."""
        if self._pid != os.getpid():
            self._held, self._parked, self._pid = 0, set(), os.getpid()
