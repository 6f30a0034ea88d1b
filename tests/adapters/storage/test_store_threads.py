"""`StoreThreads`: a store's blocking calls run on a fixed few threads, all started at the
first call and kept, so a burst of calls starts none; a cancelled caller still waits for its
call to finish; errors and context variables cross to the thread and back."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.storage.sqlite import THREADS, SqliteStore
from steerable_bridge.adapters.storage.store_threads import StoreThreads
from steerable_bridge.runtime.ports.storage import SessionRecord

pytestmark = pytest.mark.anyio

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _names(prefix: str) -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(prefix)}


async def test_every_thread_starts_at_the_first_call_and_a_burst_starts_none() -> None:
    threads = StoreThreads(3, "t-burst")
    try:
        first = await threads.run(threading.get_ident)
        assert first != threading.get_ident()  # not the loop's thread
        started = _names("t-burst")
        assert len(started) == 3
        seen: set[int] = set()
        gate = threading.Barrier(3, timeout=10)

        def hold() -> None:  # three at once: each must be on its own thread
            gate.wait()
            seen.add(threading.get_ident())

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                for _ in range(3):
                    tasks.start_soon(threads.run, hold)
        assert _names("t-burst") == started
        assert len(seen) == 3
    finally:
        threads.close()


async def test_a_cancelled_caller_waits_for_its_call_to_finish() -> None:
    threads = StoreThreads(1, "t-cancel")
    entered, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> str:
        entered.set()
        release.wait(10)
        finished.append("done")
        return "done"

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(threads.run, slow)
                await anyio.to_thread.run_sync(entered.wait, 10)
                tasks.cancel_scope.cancel()
                release.set()
        assert finished == ["done"]  # the task group ended only once the call had
    finally:
        threads.close()


async def test_an_error_is_raised_in_the_caller_and_the_caller_s_context_is_seen() -> None:
    threads = StoreThreads(1, "t-error")

    def fail() -> None:
        raise ValueError("disk says no")

    try:
        with pytest.raises(ValueError, match="disk says no"):
            await threads.run(fail)
        _who.set("caller")
        assert await threads.run(_who.get) == "caller"
    finally:
        threads.close()


async def test_close_stops_the_threads_and_a_later_call_starts_them_again() -> None:
    threads = StoreThreads(2, "t-close")
    await threads.run(int)
    running = [t for t in threading.enumerate() if t.name.startswith("t-close")]
    threads.close()
    for thread in running:
        thread.join(10)
        assert not thread.is_alive()
    assert await threads.run(int) == 0
    threads.close()


def test_a_store_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        StoreThreads(0, "none")


async def test_a_burst_of_store_calls_runs_on_the_store_s_threads_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    try:
        await store.create(SessionRecord(session_id="s", cwd="/w", created_at=0, updated_at=0))
        before = {t.ident for t in threading.enumerate()}
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                for _ in range(40):
                    tasks.start_soon(store.get, "s")
        after = {t for t in threading.enumerate() if t.ident not in before}
        assert after == set(), f"the burst started threads: {after}"
        assert len(_names("sqlite-store")) >= THREADS
    finally:
        store.close()
