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
`release_idle_memory()` is for that moment (`serve` calls it when the last run of a burst
ends, at most every `RELEASE_EVERY_S`): a full collection. Measured with
`bench/unread_streams.py` (80 streams nobody reads, then the clients leave): RSS ~92 MB
while they hang, ~84 MB once their runs ended (before the stream buffers were bounded, with
~4 MB per stream, it took ~148 to ~127 MB). glibc's `malloc_trim(0)` was measured too and
gave back 20 KB, so it is not called: what stays is CPython's own arenas (1 MiB each,
returned only when empty), which a few objects that outlive the burst keep pinned.
"""

from __future__ import annotations

import gc
import time

__all__ = ["RELEASE_EVERY_S", "YOUNG_THRESHOLD", "release_idle_memory", "settle_startup_heap"]

YOUNG_THRESHOLD = 20_000
RELEASE_EVERY_S = 10.0
_released_at = [float("-inf")]


def settle_startup_heap() -> None:
    """Collect, freeze the start-up heap and raise the young threshold (see the module)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def release_idle_memory() -> None:
    """Collect cyclic garbage, at most every `RELEASE_EVERY_S`."""
    now = time.monotonic()
    if now - _released_at[0] < RELEASE_EVERY_S:
        return
    _released_at[0] = now
    gc.collect()
