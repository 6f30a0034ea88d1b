"""The storage port: where session logs and their metadata live.

`SessionStore` is the contract storage adapters implement (`adapters/storage/memory` now,
SQLite in the durable-sessions work). The log is append-only: `append` adds events with
sequence numbers higher than any stored, `read` returns them in order. The store derives
`title` and `updated_at` from what it is given, so callers never keep two copies of them.

    store = MemoryStore()
    await store.create(SessionRecord(session_id="s1", cwd="/work", created_at=now, updated_at=now))
    await store.append("s1", [event])
    events = await store.read("s1")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from steerable_bridge.runtime.events import LoopEvent

__all__ = ["SessionNotFound", "SessionPage", "SessionRecord", "SessionStore", "StoreError"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """What a session list shows: id, working directory, title, times (ms since epoch)."""

    session_id: str
    cwd: str
    created_at: int
    updated_at: int
    title: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """One page of a listing, newest first; pass `next_cursor` back for the next page."""

    records: tuple[SessionRecord, ...]
    next_cursor: str | None = None


class StoreError(Exception):
    """A storage failure with a stable `code` and a message that names the remedy."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SessionNotFound(StoreError):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            "session_not_found",
            f"session {session_id} does not exist; list sessions to find a valid id",
        )


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
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> SessionPage:
        """Sessions, most recently updated first, optionally only those in `cwd`."""

    async def delete(self, session_id: str) -> bool:
        """Remove a session and its log; False when it did not exist."""
