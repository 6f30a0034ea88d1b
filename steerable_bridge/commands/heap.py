"""Garbage-collector settings for the long-running commands (`serve`, `acp`).

CPython's cycle collector pauses the whole process while it scans; a full collection scans
every tracked object it holds. A server starts with some 60,000 objects that live as long
as it does (modules, the SDKs' pydantic models and schemas, the app), and a busy one makes
young objects by the hundred thousand a second. `settle_startup_heap()` runs once, when
start-up is done and before serving: it collects, then freezes what is left (`gc.freeze`)
so later collections never scan it again, and raises the youngest generation's threshold
from 700 to `YOUNG_THRESHOLD` allocations, so a young collection runs once per few
hundred events instead of every few dozen — fewer, and so fewer objects that merely were
alive at the wrong moment promoted into the generations full collections scan. Measured
on `serve` under load: collection time per run down severalfold, and the longest pause
from ~180 ms to a few ms. Cyclic garbage is still collected, just in larger, rarer sweeps.

The flip side: after a burst, when the server falls quiet, nothing allocates, so no sweep
comes, and what the burst left (cancelled runs leave tracebacks, which are cycles) stays.
`IdleRelease` is for that moment (`serve`'s `on_idle`: called when the last run of a burst
ends, at most every `RELEASE_EVERY_S`): a full collection, then glibc's `malloc_trim(0)`
(`malloc_trimmer()`: looked up once, only on Linux with glibc), which hands the free pages
of malloc's heaps back to the kernel; and the same again `SETTLE_S` later, once the last
streams, connections and buffers are freed, after the store closed its idle connections
(`SqliteStore.shed_idle`). What stays is CPython's small-object allocator's 1 MiB arenas:
the burst's objects fill new ones, and an arena goes back only when every object in it is
freed, so one object made during or after the burst that lives on keeps a whole arena.
Hence the rule for what runs around a burst: make nothing that outlives it. Each survivor
an arena map found is gone: the store's per-session request writer and the delta events it
kept (dropped when a step ends; deltas kept as text, `adapters/storage/step_events.py`),
the metric series (made at start-up, values updated in place), cancelled model deadlines in
asyncio's timer heap (`timer_sweep.py`), the caches a first warning fills
(`warm_logging_caches()`), the SQLite cursors and weak references of the connections
(`shed_idle`, and a poll cursor of its own), the AnyIO worker threads a burst started (the
store runs on threads of its own, started once: `adapters/storage/store_threads.py`), and
this follow-up's own waiting task (a timer now), and what periodic work left in CPython's
type attribute cache, which keeps the name of each lookup: uvicorn's once-a-second date
(`formatdate`, whose `datetime` looks `dst` up by a name made anew; `serve` makes the
header itself, `http_date`) and `loads_strict`'s per-call decoder (six option names a
request; one shared decoder now); and the SQLite store's signal poll, 20 times a second,
parks while no claim is held (`signal_demand.py`). A few arenas still stay; the figures are
in `bench/unread_streams.py` (`--probe` prints the arena map). With `PYTHONMALLOC=malloc` small
objects come from malloc, which the trim gives back almost entirely, for ~20 % more server
CPU per run: the operator's choice, not the default.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from steerable_bridge.commands.timer_sweep import drop_cancelled_timers

__all__ = [
    "RELEASE_EVERY_S",
    "SETTLE_S",
    "YOUNG_THRESHOLD",
    "IdleRelease",
    "malloc_trimmer",
    "release_now",
    "settle_startup_heap",
    "warm_logging_caches",
]

log = logging.getLogger("steerable_bridge.heap")

YOUNG_THRESHOLD = 20_000
RELEASE_EVERY_S = 10.0
SETTLE_S = 3.0
"""How long after a burst's release it is repeated, once things have settled."""
_trimmer: list[Callable[[], object] | None] = []
"""`malloc_trimmer()`'s answer, once looked up (empty until then)."""


def settle_startup_heap() -> None:
    """Collect, freeze the start-up heap and raise the young threshold (see the module).
    Looks `malloc_trim` up first: done lazily, at the end of the first burst, its few
    lasting objects (a ctypes library and function type) would sit among the burst's; and
    fills the logging caches a first warning fills (`warm_logging_caches`)."""
    malloc_trimmer()
    warm_logging_caches()
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


LOG_ARGUMENT_TYPES: tuple[object, ...] = (0.0, 0, "", True, None, b"", Path())
"""Samples of what a one-argument log call passes (`log.warning("... %gs", seconds)`)."""


def warm_logging_caches() -> None:
    """Make now the small objects the first log records of a kind would make later.

    A `LogRecord` with one argument asks whether it is a `collections.abc.Mapping`; the
    first time a type is asked, `Mapping` and each ABC under it remember the answer (a weak
    reference in a set each, some 20 KB for a float). And a logger remembers per level
    whether it is enabled. Made during a burst (the first "read nothing for 30s" warning),
    they would stay among the burst's objects."""
    for sample in LOG_ARGUMENT_TYPES:
        isinstance(sample, Mapping)
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        if isinstance(logger, logging.Logger):
            for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
                logger.isEnabledFor(level)


def malloc_trimmer() -> Callable[[], object] | None:
    """A call of glibc's `malloc_trim(0)`, or None where there is none (not Linux, another
    C library). Looked up once per process."""
    if not _trimmer:
        _trimmer.append(_find_trimmer())
    return _trimmer[0]


def _find_trimmer() -> Callable[[], object] | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
        if not libc.gnu_get_libc_version:  # glibc only (musl has no malloc_trim)
            return None
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class IdleRelease:
    """`serve`'s `on_idle`: give a burst's memory back once its last run ended (see the module).

    Called (on the event loop) when the last run of a burst ends, at most every
    `RELEASE_EVERY_S`, it releases at once (`release_now`) and sets a timer for `SETTLE_S`
    later, when it calls each `shed` callable (the store's `shed_idle`: the connections a
    burst used) and releases once more: the last run of a burst calls this before its
    stream, connection and buffers are gone, and what they free after it would otherwise
    stay with malloc. `run` is the service the app's lifespan task group owns (started
    there, cancelled at shutdown): while it runs the timer may be set, and it cancels the
    timer when it ends. The follow-up makes nothing that outlives it — no task waiting for
    the next burst, no worker thread for the shed (closing idle connections takes a few
    milliseconds, on the loop): anything made then and kept would sit in the memory the
    burst used and keep it from going back."""

    def __init__(self, shed: Sequence[Callable[[], object]] = ()) -> None:
        self.shed = tuple(shed)
        self._released_at = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due: asyncio.TimerHandle | None = None
        """The follow-up release, while one is due."""

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._released_at < RELEASE_EVERY_S:
            return
        self._released_at = now
        release_now()
        if self._loop is None:
            return
        if self._due is not None:
            self._due.cancel()
        self._due = self._loop.call_later(SETTLE_S, self._follow_up)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Let burst ends set the follow-up timer, until cancelled (then cancel it)."""
        self._loop = asyncio.get_running_loop()
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            if self._due is not None:
                self._due.cancel()
            self._due, self._loop = None, None

    def _follow_up(self) -> None:
        self._due = None
        for shed in self.shed:
            try:
                shed()
            except Exception:  # a cache that cannot be dropped now is kept, not fatal
                log.warning("could not drop an idle cache after a burst", exc_info=True)
        release_now()


def release_now() -> None:
    """Have the loop drop its cancelled timers (`drop_cancelled_timers`), collect cyclic
    garbage and hand free heap pages back to the kernel (`malloc_trim`)."""
    _release()


def _release() -> None:
    drop_cancelled_timers()
    gc.collect()
    trim = malloc_trimmer()
    if trim is not None:
        trim()
