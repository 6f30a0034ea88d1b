"""settle_startup_heap: what start-up made is frozen, young collections run less often."""

from __future__ import annotations

import gc

from steerable_bridge.commands.heap import YOUNG_THRESHOLD, settle_startup_heap


def test_the_startup_heap_is_frozen_and_the_young_threshold_raised() -> None:
    before = gc.get_threshold()
    made_at_startup = [object(), {"a": []}]
    try:
        settle_startup_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert made_at_startup[1] == {"a": []}
        cycle: list[object] = []
        cycle.append(cycle)  # garbage made later is still collected
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
