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
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_startup_heap"]

YOUNG_THRESHOLD = 20_000


def settle_startup_heap() -> None:
    """Collect, freeze the start-up heap and raise the young threshold (see the module)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
