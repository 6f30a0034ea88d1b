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
(`malloc_trimmer()`: looked up once, only on Linux with glibc; elsewhere there is nothing to
call), which hands the free pages inside malloc's heaps back to the kernel. Measured with
`bench/unread_streams.py --duration 40 --after 20 --every 10` (80 streams nobody reads,
then the clients leave; RSS at the start / after): ~67 / ~94 MB before the trim (and before
threads whose client left were dropped), ~68 / ~85 MB (+26 %) with both. What stays is
CPython's small-object allocator's 1 MiB arenas: the burst's small objects (mostly the
streamed deltas each run holds) fill ~20 new arenas, and an arena goes back only when every
object in it is freed. A map of what outlived a burst, arena by arena, found: the store's
request writer of each session, which also kept a cancelled model call's every delta (so
each burst grew the heap again, +12 MB per 80 streams; now dropped when the step ends, and
the writer when the session leaves memory), and the `malloc_trim` lookup itself (now done
here, at start-up). Three smaller survivors are gone too: the metric values (now updated
in place, `adapters/telemetry/inplace.py`), each run's cancelled 300 s model deadline, which
asyncio kept in its timer heap for five minutes (purged after a burst, `timer_sweep.py`), and the
caches a first warning fills (`warm_logging_caches()`, at start-up). A `tracemalloc` map
from the start to 10 s after the clients left now finds ~90 live blocks (~17 KB; it was
~250, ~42 KB), mostly made after the burst by periodic work (uvicorn's date header each
second, the signal poll's SQLite cursors) in pools the burst left partly used; the burst
still leaves ~7 more 1 MiB arenas than at the start, and some 5 MB more in glibc's heaps.
Those alone did not move RSS measurably (~81 MB after, +27 %). What did: repeating the
release `SETTLE_S` after the burst's, once the last streams, connections and their buffers
were freed (the first runs as the last run ends, before they are): after 80 unread streams
(`--duration 120`) RSS is ~64 → ~73 MB (+14 %). That follow-up is `IdleRelease.run`, a
service the app's lifespan task group owns (cancelled when the server stops); before it
releases, it has the store close its idle connections (`SqliteStore.shed_idle`, in a worker
thread): an arena map taken with `tracemalloc` after a burst (each live object's 16 KiB pool
header names its arena) found, in most of the arenas the burst left, the dead weak
references each SQLite connection keeps to the cursors it made (CPython prunes that list
once per 200 cursors) and the readers' statements. Also gone from the map: the
`runs_finished{stop_reason="cancelled"}` series the first cancelled runs made (every stop
reason's series is now made at start-up). What the map still shows after those, ~8-10
arenas more than at the start: an AnyIO worker thread made during the burst that the
signal poll keeps alive (its queue, conditions and locks), and periodic work (uvicorn's
main-loop tick and date header, the signal poll's futures) whose short-lived objects keep
reusing the same burst pools, so those pools never empty. glibc's heaps are not what
stays: `malloc_info` shows the main heap and the worker threads' arenas back near their
start-up size after the trim (which, since glibc 2.8, trims every arena, not only the main
one's top), and `MALLOC_ARENA_MAX=2` moves the figure by ~1 MB, within the run-to-run noise.
So RSS did not move measurably either: ~64 → ~74-75 MB after 80 unread streams (+15-18 %;
before, on the same machine, 74.5), three bursts ~72, ~77, ~78 MB.
With `PYTHONMALLOC=malloc` in `serve`'s environment small objects come from malloc instead
and the trim gives nearly all of it back: ~67 / ~68 MB (+1 %, the bench's `--malloc`), for
~20 % more server CPU per run (`bench/agui_concurrency.py --runs 500`: 1.6-1.8 ms → 2.0 ms),
so it is the operator's choice, not the default.
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
