"""The threads a store's blocking calls run on: a fixed few, started together, kept for good.

`sqlite3` blocks, so the SQLite store runs every call in a thread. AnyIO's shared worker
pool starts a thread whenever none is idle and stops one only when a later call finds it
idle for ten seconds, so a burst of runs starts workers whose objects (their queue, its
conditions and locks, their thread-local state) are made among the burst's objects and last
as long as the worker — one kept busy by the signal poll after the burst lasts for good —
each holding a 1 MiB arena of CPython's allocator that the burst filled and would otherwise
give back. `StoreThreads` starts all its threads at the first call (at start-up, when a
server opens its store) and keeps them: a burst makes none. A call waits for its thread to
finish even when its caller is cancelled (the cancellation is delivered right after), so a
transaction is never left half-done, as with `anyio.to_thread.run_sync` and its default. A
forked child starts its own threads at its first call. Runs on asyncio (the backend the
project uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

__all__ = ["StoreThreads"]

T = TypeVar("T")

_Call = tuple[
    contextvars.Context,
    Callable[..., Any],
    tuple[Any, ...],
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class StoreThreads:
    """`count` threads taking calls from one queue (see the module docstring)."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError(f"a store needs at least one thread, not {count}")
        self.count = count
        self.name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._pid: int | None = None
        self._start_lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in one of the threads, in a copy of the caller's context."""
        if self._pid != os.getpid():
            self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((contextvars.copy_context(), fn, args, loop, future))
        with anyio.CancelScope(shield=True):  # a started call is waited for, never abandoned
            result = await future
        return result

    def close(self) -> None:
        """Stop the threads once the calls queued before this are done (they are daemons:
        a process that exits without closing does not wait for them)."""
        with self._start_lock:
            if self._pid == os.getpid():
                for _ in self._threads:
                    self._calls.put(None)
            self._threads, self._pid = [], None

    def _start(self) -> None:
        with self._start_lock:
            if self._pid == os.getpid():
                return
            self._calls = queue.SimpleQueue()  # a forked child's queue is not its parent's
            self._threads = [
                threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
                for i in range(self.count)
            ]
            for thread in self._threads:
                thread.start()
            self._pid = os.getpid()

    def _work(self) -> None:
        calls = self._calls
        while True:
            call = calls.get()
            if call is None:
                return
            context, fn, args, loop, future = call
            result: Any = None
            error: BaseException | None = None
            try:
                result = context.run(fn, *args)
            except BaseException as caught:  # handed to the caller, which raises it
                error = caught
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
                loop.call_soon_threadsafe(_settle, future, result, error)
            del call, context, fn, args, loop, future, result, error
