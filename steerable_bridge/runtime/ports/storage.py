"""The storage port: where session logs and their metadata live.

`SessionStore` is the contract storage adapters implement (`adapters/storage/memory` now,
SQLite in the durable-sessions work). The log is append-only: `append` adds events with
sequence numbers higher than any stored, `read` returns them in order. The store derives
`title` and `updated_at` from what it is given, so callers never keep two copies of them.

Two optional extensions, reached through `claim_session` and `read_tail` so a store without
them still works: `claim(session_id)` is an async context manager the session holds while it
runs a turn, so two processes sharing a store never write one session at once (it raises
`SessionOwned` naming the owner); `read_tail(session_id)` returns the log from the newest
compaction boundary on, plus the earlier events session facts need (`carries_facts`);
`read_tail_entries(session_id)` the same with each stored run of deltas as one `DeltaRun`.
`owner(session_id)` (plain or async), reached through `session_owner`, names the process
running a turn in the session, or None. `forget(session_id)`, reached through
`forget_cached`, drops what the store keeps in memory for a session (its request writer);
the agent calls it when the session leaves its memory, so nothing of a session outlives it
there (the store rebuilds it from the next read). `adopt(session_id, user)`, reached
through `adopt_session`, gives a session stored without an owner (from before a server told
users apart) to `user`, and never takes one from its owner. Stores shared by several
processes also carry signals between them (`signals.py`).

    store = MemoryStore()
    await store.create(SessionRecord(session_id="s1", cwd="/work", created_at=now, updated_at=now))
    await store.append("s1", [event])
    events = await store.read("s1")
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, cast

from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.events import Compaction, LoopEvent
from steerable_bridge.runtime.session_log.delta_runs import Entry

__all__ = [
    "STORAGE_FULL",
    "SessionBusy",
    "SessionNotFound",
    "SessionOwned",
    "SessionPage",
    "SessionRecord",
    "SessionStore",
    "StoreError",
    "adopt_session",
    "claim_session",
    "forget_cached",
    "read_tail",
    "read_tail_entries",
    "session_owner",
    "storage_full",
    "tail_start",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """What a session list shows: id, working directory, title, times (ms since epoch)."""

    session_id: str
    cwd: str
    created_at: int
    updated_at: int
    title: str | None = None
    model: str | None = None
    user: str | None = None
    """Who created it, for servers that tell users apart (None: no such server did)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """One page of a listing, newest first; pass `next_cursor` back for the next page."""

    records: tuple[SessionRecord, ...]
    next_cursor: str | None = None


class StoreError(CodedError):
    """A storage failure with a stable `code` and a message that names the remedy."""


STORAGE_FULL = "storage_full"
"""The code of a `StoreError` raised because the disk (or quota) holding the store is full."""


def storage_full(where: str, detail: str) -> StoreError:
    """The `storage_full` error for the store at `where`, naming the remedy."""
    return StoreError(
        STORAGE_FULL,
        f"the disk holding the session store {where} is full ({detail}); free some space or"
        " raise the quota, then send the message again — what was stored before is kept",
    )


class SessionNotFound(StoreError):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            "session_not_found",
            f"session {session_id} does not exist; list sessions to find a valid id",
        )


class SessionBusy(CodedError):
    """A second prompt reached a session that is already running one (re-exported by
    `runtime.agent_sessions.session`, where it has always been imported from)."""

    code = "session_busy"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            "session_busy",
            f"session {session_id} is already running a prompt; wait for it to finish or"
            " cancel it first",
        )


class SessionOwned(SessionBusy, StoreError):
    """Another process (or another agent in this one) is running a turn in the session.

    A `SessionBusy` (so code that handles a busy session handles this one) and a
    `StoreError` with code `session_owned` whose message names the owner.
    """

    def __init__(self, session_id: str, owner: str) -> None:
        message = (
            f"session {session_id} is running a turn in {owner}; wait for that turn to"
            " finish, cancel it there, or stop that process"
        )
        CodedError.__init__(self, "session_owned", message)
        self.session_id = session_id
        self.owner = owner


class SessionStore(Protocol):
    """Persists sessions. Every method may be called concurrently from one event loop."""

    async def create(self, record: SessionRecord) -> None:
        """Register a new session; raises StoreError `session_exists` on a duplicate id."""

    async def append(self, session_id: str, events: Sequence[LoopEvent]) -> None:
        """Append events (seq strictly above every stored one); updates title / updated_at."""

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        """Events with seq > after_seq, in order; raises SessionNotFound."""

    async def get(self, session_id: str) -> SessionRecord | None:
        """The session's record, or None."""

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        """Sessions, most recently updated first, optionally only those in `cwd` or only
        those `user` created."""

    async def delete(self, session_id: str) -> bool:
        """Remove a session and its log; False when it did not exist."""


def claim_session(store: SessionStore, session_id: str) -> AbstractAsyncContextManager[None]:
    """The store's `claim(session_id)` if it has one, otherwise a claim that always succeeds.

    A claim is exclusive and never waits: entering it raises `SessionOwned` when someone
    else holds it. The holder's process dying releases it.
    """
    claim = getattr(store, "claim", None)
    if claim is None:
        return _no_claim()
    return cast(AbstractAsyncContextManager[None], claim(session_id))


async def adopt_session(store: SessionStore, session_id: str, user: str) -> bool:
    """Give the session to `user` when it has no owner: True when it had none and now is
    `user`'s, or already was; False when another user owns it. Raises SessionNotFound, or
    StoreError `owners_unsupported` for a store that keeps no owners."""
    adopt = getattr(store, "adopt", None)
    if adopt is None:
        raise StoreError(
            "owners_unsupported",
            f"{type(store).__name__} keeps no session owners; use a SQLite or PostgreSQL --storage",
        )
    return cast(bool, await adopt(session_id, user))


def forget_cached(store: SessionStore, session_id: str) -> None:
    """The store's `forget(session_id)` if it has one: it drops what it keeps in memory for
    the session (the log is untouched; the next read of the session rebuilds it)."""
    forget = getattr(store, "forget", None)
    if forget is not None:
        forget(session_id)


def tail_start(compaction: Compaction, run_start: int) -> int:
    """The first seq a resume reads, given the newest `history` compaction and the seq of
    the `run_started` of its run: that run's start, or the first event the compaction kept
    verbatim (after its `through_seq`) when that lies earlier."""
    return min(run_start, compaction.through_seq + 1)


async def read_tail(store: SessionStore, session_id: str) -> list[LoopEvent]:
    """The store's `read_tail(session_id)` if it has one, otherwise the whole log.

    A tail starts at the newest `history` compaction's run, or earlier at the turns it kept
    verbatim (`tail_start`: everything the model still sees), and is preceded by the
    earlier events that `projection.carries_facts` marks, so `session_facts` over it equals
    `session_facts` over the whole log.
    """
    tail = getattr(store, "read_tail", None)
    if tail is None:
        return await store.read(session_id)
    return cast(list[LoopEvent], await tail(session_id))


async def read_tail_entries(store: SessionStore, session_id: str) -> list[Entry]:
    """`read_tail`, from the store's `read_tail_entries(session_id)` when it has one: each
    message's streamed deltas may come as one `DeltaRun` (`delta_runs.py`), as a log holds
    them in memory, so a load never builds an event per token."""
    entries = getattr(store, "read_tail_entries", None)
    if entries is None:
        return list(await read_tail(store, session_id))
    return cast(list[Entry], await entries(session_id))


async def session_owner(store: SessionStore, session_id: str) -> str | None:
    """Who holds the session's claim (another process's description), or None when nobody
    does or the store does not share sessions between processes."""
    owner = getattr(store, "owner", None)
    if owner is None:
        return None
    found = owner(session_id)
    if inspect.isawaitable(found):
        found = await found
    return cast(str | None, found)


@asynccontextmanager
async def _no_claim() -> AsyncIterator[None]:
    yield
