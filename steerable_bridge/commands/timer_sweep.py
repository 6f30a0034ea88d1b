"""Dropping the cancelled timers an asyncio loop still holds, after a burst.

A deadline (`anyio.fail_after`, `move_on_after`, `loop.call_later`) is a timer handle in the
event loop's heap of scheduled calls. Cancelling it, when the guarded work ends early as it
nearly always does, only marks it: asyncio leaves it in the heap until its time comes (a
model call's 300 s deadline stays five minutes), and purges cancelled handles all at once
only when more than half of a heap of over 100 are cancelled. After a burst of runs, each
one's last deadlines are small objects scattered through the memory the burst used, and
each keeps its 1 MiB arena of CPython's small-object allocator from going back to the
system. `drop_cancelled_timers()` makes the loop purge them: it schedules and at once
cancels enough far-off placeholder calls (`SWEEP_TIMERS`) to tip that ratio, so the loop's
next iteration rebuilds its heap with only the live handles, the placeholders gone too.
Only public loop calls are used; on a loop that frees a cancelled timer at once (uvloop)
it is merely a few hundred wasted calls. Outside a running loop it does nothing.
"""

from __future__ import annotations

import asyncio
import contextvars

__all__ = ["SWEEP_TIMERS", "drop_cancelled_timers"]

SWEEP_TIMERS = 512
"""Placeholders per sweep: the purge needs cancelled handles to outnumber live ones (a
quiet server has a few dozen live: keep-alive, housekeeping)."""
_FAR_S = 86_400.0
_CONTEXT = contextvars.Context()
"""The placeholders' context, made once at import: without one, each call copies the
current context, and the copies, freed when the loop purges the placeholders, fill
CPython's context free list (255 kept) with objects made inside the burst's arenas, so the
sweep itself kept some of those arenas from going back."""


def _never() -> None:
    """A placeholder's callback; it is cancelled before it could run."""


def drop_cancelled_timers() -> None:
    """Have the running loop purge its cancelled timer handles (see the module)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    when = loop.time() + _FAR_S
    for _ in range(SWEEP_TIMERS):
        loop.call_at(when, _never, context=_CONTEXT).cancel()
