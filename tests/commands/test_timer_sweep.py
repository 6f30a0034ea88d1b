"""drop_cancelled_timers: deadlines that ended early leave the event loop's heap at once
instead of staying until their time (a model call's deadline: five minutes)."""

from __future__ import annotations

import asyncio
import gc
import weakref

import anyio

from steerable_bridge.commands.timer_sweep import drop_cancelled_timers


def _run_with_deadlines(count: int) -> list[weakref.ref[asyncio.TimerHandle]]:
    """What a burst of runs leaves: each guarded its work with a long deadline, ended early
    and cancelled it."""
    loop = asyncio.get_running_loop()
    handles = [loop.call_later(300.0, print) for _ in range(count)]
    for handle in handles:
        handle.cancel()
    return [weakref.ref(handle) for handle in handles]


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()


def test_cancelled_deadlines_leave_the_loop_after_a_sweep() -> None:
    async def main() -> None:
        live = asyncio.get_running_loop().call_later(300.0, print)  # a deadline still running
        refs = _run_with_deadlines(80)
        await _settle()
        assert sum(ref() is not None for ref in refs) == 80  # asyncio keeps them until due
        drop_cancelled_timers()
        await _settle()
        assert [ref for ref in refs if ref() is not None] == []
        assert not live.cancelled()
        with anyio.fail_after(5):  # and the loop still runs what is due
            done = asyncio.Event()
            asyncio.get_running_loop().call_later(0.01, done.set)
            await done.wait()
        live.cancel()

    asyncio.run(main())


def test_outside_a_running_loop_it_does_nothing() -> None:
    drop_cancelled_timers()
