"""When a polling signal listener has to look: only while this process holds a claim.

A signal (`runtime/agent_sessions/signals.py`) can only matter to the process running the
session's turn, and a turn runs under the session's claim (`Session.prompt` enters
`claim_session` after it marks itself running and leaves it before it stops), so a process
holding no claim has nothing to deliver a signal to. The SQLite store's `listen` polls its
`signals` table, and a poll made while nothing can use its answer is only periodic work,
whose small allocations land in the memory a burst of runs freed and keep it from going back
to the system. `SignalDemand` counts the claims a process holds and parks its listeners
while there are none: a parked listener waits on a future made beforehand and polls nothing
(asyncio, the backend the project uses). Entering a claim wakes every parked listener and
waits until each has taken its mark (the newest signal's id) before the claim takes the
session's lock, so every signal published once another process can see the claim lies after
the mark and is delivered, exactly as the first poll of `listen` starts; a signal published
while the process held no claim is skipped, as it was for no turn here. Single event loop
per process; a forked child starts with no claims and no parked listeners. Never used for
anything but gating polls: the lock itself is `ownership.py`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

log = logging.getLogger("steerable_bridge.storage")

MARK_WAIT_S = 5.0
"""The longest a claim waits for a woken listener to take its mark (one indexed read); past
it the claim goes on, with a warning: a signal published meanwhile may be missed."""

__all__ = ["Parked", "SignalDemand"]


@dataclass(eq=False)
class Parked:
    """One listener waiting for a claim: `wake` is done once one is entered, and `ready`
    set once the listener has its mark (`SignalDemand.resumed`)."""

    wake: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    ready: anyio.Event = field(default_factory=anyio.Event)


class SignalDemand:
    """The claims this process holds and the listeners parked until one is entered.

    A listener, before each poll: `parked = demand.park()`; None means poll on, otherwise
    `await parked.wake`, take the mark, and `demand.resumed(parked)` (in a `finally`). What
    a parked listener waits on is made when it resumes (inside a claim: when a burst of runs
    starts), not when it parks (when the burst ends): made then, among the burst's objects
    and kept while the process is quiet, it would keep their memory from going back; parking
    itself makes only what an `await` of a future makes."""

    def __init__(self) -> None:
        self._held = 0
        self._parked: set[Parked] = set()
        self._spares: list[Parked] = []
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
                if not parked.wake.done():
                    parked.wake.set_result(None)
                with anyio.move_on_after(MARK_WAIT_S) as waited:
                    await parked.ready.wait()
                if waited.cancelled_caught:
                    log.warning(
                        "the signal listener did not read the newest signal within %.0f s;"
                        " the claim goes on (a signal sent meanwhile may be missed)",
                        MARK_WAIT_S,
                    )
            yield
        finally:
            if pid == os.getpid():  # a forked child never held the parent's claim
                self._held -= 1

    def park(self) -> Parked | None:
        """None while a claim is held (poll on); otherwise the listener is parked until the
        next claim is entered (see the class docstring)."""
        self._forked()
        if self._held:
            return None
        loop = asyncio.get_running_loop()
        parked = self._spares.pop() if self._spares else Parked()
        if parked.wake.get_loop() is not loop or parked.wake.done():  # made for another loop
            parked = Parked()
        self._parked.add(parked)
        return parked

    def resumed(self, parked: Parked) -> None:
        """The listener has its mark (or gave up, cancelled or failing): the claims waiting
        for it go on, and what its next park will wait on is made now."""
        self._parked.discard(parked)
        parked.ready.set()
        self._spares.append(Parked())

    def _forked(self) -> None:
        """In a forked child: the parent's claims and parked listeners are not this one's."""
        if self._pid != os.getpid():
            self._held, self._parked, self._spares, self._pid = 0, set(), [], os.getpid()
