"""Blocking work in a worker thread that stops when its caller is cancelled.

`anyio.to_thread.run_sync` cannot interrupt a thread, and by default it makes a cancelled
caller wait until the thread returns, so a tool timeout or a client that left would wait
for a read or a search to finish by itself. `run_stoppable(work)` hands `work` a
`threading.Event`, lets the caller leave at once when it is cancelled, and sets the event
as it leaves (cancelled, timed out, or done), so `work`, which checks the event between
small steps, ends within one step instead of running on for nobody. The tools that read
and search the local disk (`local_env.py`, `search.py`) use it for everything they do in
threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio

__all__ = ["run_stoppable"]

T = TypeVar("T")


async def run_stoppable(work: Callable[[threading.Event], T]) -> T:
    """Run `work(stop)` in a worker thread; `stop` is set when this call ends, however."""
    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(work, stop, abandon_on_cancel=True)
    finally:
        stop.set()
