"""The storage port (`runtime/ports/storage.py`): its optional extensions are reached through
helpers that also work for a store without them — `claim_session` (exclusive, never waits;
a bare store's claim always succeeds), `adopt_session` (refused with `owners_unsupported`
by a store that keeps no owners), `forget_cached`, `read_tail` / `read_tail_entries` (the
whole log from a bare store), `session_owner` (plain or async, None when unknown);
`tail_start` picks where a resume reads from; the errors carry stable codes and remedies.
Each store's own contract is pinned in `tests/adapters/storage/`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.storage import (
    STORAGE_FULL,
    SessionBusy,
    SessionNotFound,
    SessionOwned,
    SessionPage,
    SessionRecord,
    StoreError,
    adopt_session,
    claim_session,
    forget_cached,
    read_tail,
    read_tail_entries,
    session_owner,
    storage_full,
    tail_start,
)
from steerable_bridge.runtime.session_log.log import SessionLog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

RECORD = SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1)


class BareStore:
    """A store with only the six methods of the port (no claim, tail, owner, adopt)."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    async def create(self, record: SessionRecord) -> None:
        await self._inner.create(record)

    async def append(self, session_id: str, events: Sequence[ev.LoopEvent]) -> None:
        await self._inner.append(session_id, events)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[ev.LoopEvent]:
        return await self._inner.read(session_id, after_seq=after_seq)

    async def get(self, session_id: str) -> SessionRecord | None:
        return await self._inner.get(session_id)

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        return await self._inner.list(cwd=cwd, cursor=cursor, limit=limit, user=user)

    async def delete(self, session_id: str) -> bool:
        return await self._inner.delete(session_id)


def compaction(through_seq: int) -> ev.Compaction:
    return ev.Compaction(
        session_id="s1", run_id="r", seq=20, ts=1, summary="s", through_seq=through_seq
    )


@pytest.mark.parametrize(("through", "run_start", "start"), [(9, 12, 10), (15, 12, 12)])
def test_the_tail_starts_at_the_run_or_earlier_at_the_turns_kept_verbatim(
    through: int, run_start: int, start: int
) -> None:
    assert tail_start(compaction(through), run_start) == start


async def test_a_bare_stores_claim_always_succeeds_and_may_be_held_twice() -> None:
    store = BareStore()
    async with claim_session(store, "s1"), claim_session(store, "s1"):
        pass
    assert await session_owner(store, "s1") is None
    forget_cached(store, "s1")  # nothing to forget: no error


async def test_a_claim_is_exclusive_and_never_waits() -> None:
    store = MemoryStore()
    async with claim_session(store, "s1"):
        with pytest.raises(SessionOwned) as owned:
            async with claim_session(store, "s1"):
                pass
        async with claim_session(store, "s2"):  # another session is free
            pass
    assert owned.value.code == "session_owned" and "pid" in owned.value.owner
    async with claim_session(store, "s1"):  # released when the holder left
        pass


async def test_the_owner_is_named_while_another_store_holds_the_claim(tmp_path: Path) -> None:
    mine, theirs = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    await mine.create(RECORD)
    assert await session_owner(theirs, "s1") is None
    async with claim_session(mine, "s1"):
        assert await session_owner(theirs, "s1") is not None
        with pytest.raises(SessionOwned):
            async with claim_session(theirs, "s1"):
                pass
    assert await session_owner(theirs, "s1") is None
    await mine.aclose()
    await theirs.aclose()


async def test_an_async_owner_method_is_awaited() -> None:
    class AsyncOwner(BareStore):
        async def owner(self, session_id: str) -> str | None:
            return f"worker for {session_id}"

    assert await session_owner(AsyncOwner(), "s1") == "worker for s1"


async def test_adopting_gives_an_ownerless_session_and_never_takes_one() -> None:
    store = MemoryStore()
    await store.create(RECORD)
    await store.create(dataclasses.replace(RECORD, session_id="s2", user="bob"))
    assert await adopt_session(store, "s1", "ann") is True
    assert await adopt_session(store, "s1", "ann") is True  # already hers
    assert await adopt_session(store, "s1", "bob") is False
    assert await adopt_session(store, "s2", "ann") is False
    record = await store.get("s1")
    assert record is not None and record.user == "ann"
    with pytest.raises(SessionNotFound):
        await adopt_session(store, "nope", "ann")


async def test_a_store_without_owners_refuses_adoption_and_names_the_remedy() -> None:
    with pytest.raises(StoreError) as refused:
        await adopt_session(BareStore(), "s1", "ann")
    assert refused.value.code == "owners_unsupported"
    assert "BareStore" in str(refused.value) and "--storage" in str(refused.value)


async def test_a_bare_store_reads_its_whole_log_as_the_tail() -> None:
    store = BareStore()
    await store.create(RECORD)
    log = SessionLog("s1")
    events = [log.record(ev.TextDelta, "r", message_id="m", delta=str(i)) for i in range(3)]
    await store.append("s1", events)
    assert await read_tail(store, "s1") == events
    assert await read_tail_entries(store, "s1") == events


def test_the_errors_carry_stable_codes_and_name_the_remedy() -> None:
    missing = SessionNotFound("s1")
    assert missing.code == "session_not_found" and "list sessions" in str(missing)
    busy = SessionBusy("s1")
    assert busy.code == "session_busy" and "cancel it first" in str(busy)
    owned = SessionOwned("s1", "pid 7")
    assert isinstance(owned, SessionBusy) and isinstance(owned, StoreError)
    assert owned.code == "session_owned" and "pid 7" in str(owned) and owned.owner == "pid 7"
    full = storage_full("/var/db", "no space left")
    assert full.code == STORAGE_FULL == "storage_full"
    assert "free some space" in str(full) and "/var/db" in str(full)
