"""`SignalDemand` (`adapters/storage/signal_demand.py`): a listener polls on while a claim is
held and parks while none is; entering a claim wakes every parked listener and goes on only
once each has taken its mark; a listener cancelled while parked never holds a claim up;
several claims entered together wait for the one mark; what a listener parks on is made
when it resumes, not when it parks; a forked child starts afresh."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from steerable_bridge.adapters.storage import signal_demand
from steerable_bridge.adapters.storage.signal_demand import SignalDemand

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


async def listen_once(demand: SignalDemand, mark: Callable[[], Awaitable[int]]) -> int | None:
    """What a listener does before a poll: park if no claim is held, then take the mark."""
    parked = demand.park()
    if parked is None:
        return None
    try:
        await parked.wake
        return await mark()
    finally:
        demand.resumed(parked)


async def until_parked(demand: SignalDemand, count: int) -> None:
    while demand.parked != count:
        await anyio.lowlevel.checkpoint()


async def test_while_a_claim_is_held_a_listener_does_not_park() -> None:
    demand = SignalDemand()
    async with demand.claiming():
        assert demand.held == 1
        assert demand.park() is None
    assert demand.held == 0 and demand.parked == 0


async def test_a_claim_waits_until_the_parked_listener_has_its_mark() -> None:
    demand = SignalDemand()
    order: list[str] = []
    marking, gate = anyio.Event(), anyio.Event()
    resumed: list[int | None] = []

    async def mark() -> int:
        marking.set()
        await gate.wait()
        order.append("mark")
        return 7

    async def listener() -> None:
        resumed.append(await listen_once(demand, mark))

    async def turn() -> None:
        async with demand.claiming():
            order.append("claimed")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener)
            await until_parked(demand, 1)
            tg.start_soon(turn)
            tg.start_soon(turn)  # a second claim entered meanwhile waits for the same mark
            await marking.wait()
            assert order == []  # both claims wait: the listener is taking its mark
            gate.set()
    assert order == ["mark", "claimed", "claimed"]
    assert resumed == [7] and demand.parked == 0 and demand.held == 0


async def test_what_a_listener_parks_on_next_is_made_when_it_resumes() -> None:
    demand = SignalDemand()

    async def mark() -> int:
        return 0

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen_once, demand, mark)
            await until_parked(demand, 1)
            async with demand.claiming():
                spare = demand._spares[-1]  # made while the claim is held
        assert demand.park() is spare


async def test_a_listener_cancelled_while_parked_never_holds_a_claim_up() -> None:
    demand = SignalDemand()

    async def mark() -> int:
        return 0

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen_once, demand, mark)
            await until_parked(demand, 1)
            tg.cancel_scope.cancel()
        assert demand.parked == 0
        async with demand.claiming():
            assert demand.held == 1


async def test_a_mark_that_fails_still_lets_the_claim_go_on() -> None:
    demand = SignalDemand()

    async def mark() -> int:
        raise OSError("the store went away")

    async def listener() -> None:
        with pytest.raises(OSError):
            await listen_once(demand, mark)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener)
            await until_parked(demand, 1)
            async with demand.claiming():
                assert demand.held == 1


async def test_a_forked_child_starts_with_no_claims_and_no_parked_listeners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    demand = SignalDemand()
    async with demand.claiming():
        assert demand.held == 1
        monkeypatch.setattr(signal_demand.os, "getpid", lambda: -1)  # now in the child
        assert demand.held == 0
    assert demand.held == 0  # leaving the parent's claim does not count in the child


async def test_a_listener_stuck_taking_its_mark_holds_a_claim_up_only_so_long(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(signal_demand, "MARK_WAIT_S", 0.01)
    demand = SignalDemand()
    stuck = anyio.Event()  # never set: the mark's read never returns

    async def mark() -> int:
        await stuck.wait()
        return 0

    async with anyio.create_task_group() as tg:
        tg.start_soon(listen_once, demand, mark)
        await until_parked(demand, 1)
        async with demand.claiming():
            assert demand.held == 1  # the claim went on without the mark
        tg.cancel_scope.cancel()
    assert "did not read the newest signal" in caplog.text
