"""settle_startup_heap: what start-up made is frozen, young collections run less often;
IdleRelease: garbage collected and the C heap trimmed when a burst ends, and again, after the
idle caches were dropped, once it settled, by a service its task group owns."""

from __future__ import annotations

import abc
import gc
import logging
import platform
import sys
import tracemalloc
import weakref
from collections.abc import Mapping

import anyio
import pytest

from steerable_bridge.commands import heap
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


def test_a_burst_end_collects_and_trims_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(heap, "_trimmer", [lambda: trims.append(gc.get_count()[0])])
    release = heap.IdleRelease()
    watcher = weakref.ref(_Node())  # a cycle nobody holds, gone only by a collection
    release()
    assert watcher() is None
    assert len(trims) == 1
    release()  # a second burst end within RELEASE_EVERY_S: nothing more
    assert len(trims) == 1


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_on_glibc_the_trim_is_found_once_and_runs() -> None:
    trim = heap.malloc_trimmer()
    assert trim is not None and heap.malloc_trimmer() is trim
    assert trim() in (0, 1)  # 1: memory was given back, 0: there was none to give


class _Node:
    def __init__(self) -> None:
        self.me = self


def _forget_mapping_answers() -> None:
    """As in a fresh process: no ABC under `Mapping` has been asked about any type yet."""
    pending: list[type] = [Mapping]
    while pending:
        cls = pending.pop()
        cls._abc_caches_clear()  # type: ignore[attr-defined]
        pending.extend(cls.__subclasses__())


def test_a_first_warning_after_the_warm_up_leaves_nothing_behind() -> None:
    def lasting_from_a_warning() -> list[tracemalloc.StatisticDiff]:
        logger = logging.getLogger("steerable_bridge.tests.heap_warm")
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        logger.isEnabledFor(logging.WARNING)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            logger.warning("a client read nothing for %gs", 30.0)
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        return [
            stat
            for stat in after.compare_to(before, "filename")
            if stat.size_diff > 0 and stat.traceback[0].filename in ("<frozen abc>", abc.__file__)
        ]

    _forget_mapping_answers()
    assert lasting_from_a_warning() != []  # what a burst's first warning used to leave
    _forget_mapping_answers()
    heap.warm_logging_caches()
    assert lasting_from_a_warning() == []


def test_a_release_is_repeated_once_things_settled_after_the_caches_are_shed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> list[str]:
        calls: list[str] = []
        settled = anyio.Event()

        def trim() -> None:
            calls.append("trim")
            if len(calls) == 3:
                settled.set()

        monkeypatch.setattr(heap, "_trimmer", [trim])
        monkeypatch.setattr(heap, "SETTLE_S", 0.01)
        release = heap.IdleRelease(shed=[lambda: calls.append("shed")])
        async with anyio.create_task_group() as tasks:
            await tasks.start(release.run)
            release()
            assert calls == ["trim"]
            watcher = weakref.ref(_Node())  # freed after the first release, before the second
            with anyio.fail_after(5):
                await settled.wait()
            assert watcher() is None
            tasks.cancel_scope.cancel()  # the owner ends the service
        return calls

    assert anyio.run(main) == ["trim", "shed", "trim"]


def test_a_cache_that_cannot_be_shed_does_not_stop_the_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse() -> None:
        raise OSError("busy")

    async def main() -> int:
        trims: list[int] = []
        done = anyio.Event()

        def trim() -> None:
            trims.append(1)
            if len(trims) == 2:
                done.set()

        monkeypatch.setattr(heap, "_trimmer", [trim])
        monkeypatch.setattr(heap, "SETTLE_S", 0.01)
        release = heap.IdleRelease(shed=[refuse])
        async with anyio.create_task_group() as tasks:
            await tasks.start(release.run)
            release()
            with anyio.fail_after(5):
                await done.wait()
            tasks.cancel_scope.cancel()
        return len(trims)

    assert anyio.run(main) == 2
