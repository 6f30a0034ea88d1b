"""In-memory `SessionStore`: sessions live as long as the process (`--storage memory`).

Implements the storage port exactly as a durable store must behave — append-only with
strictly increasing seq, newest-first listing with an opaque cursor, title and updated_at
derived from appended events, a tail read from the newest compaction, an exclusive claim per
session (in this process only) — so tests written against it hold for every store.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from steerable_bridge.adapters.storage.appending import check_batch
from steerable_bridge.adapters.storage.cursor import decode_cursor, encode_cursor
from steerable_bridge.runtime.events import Compaction, LoopEvent, RunStarted
from steerable_bridge.runtime.model_context.projection import carries_facts
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionOwned,
    SessionPage,
    SessionRecord,
    StoreError,
    tail_start,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """Sessions and their logs in dictionaries."""

    def __init__(self) -> None:
        self._records: dict[str, SessionRecord] = {}
        self._events: dict[str, list[LoopEvent]] = {}
        self._claimed: set[str] = set()

    async def create(self, record: SessionRecord) -> None:
        if record.session_id in self._records:
            raise StoreError(
                "session_exists", f"session {record.session_id} already exists; pick another id"
            )
        self._records[record.session_id] = record
        self._events[record.session_id] = []

    async def append(self, session_id: str, events: Sequence[LoopEvent]) -> None:
        record = self._records.get(session_id)
        if record is None:
            raise SessionNotFound(session_id)
        log = self._events[session_id]
        last = log[-1].seq if log else -1
        title = check_batch(session_id, last, events, record.title)
        log.extend(events)
        if events:
            self._records[session_id] = replace(record, title=title, updated_at=events[-1].ts)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        log = self._events.get(session_id)
        if log is None:
            raise SessionNotFound(session_id)
        return [e for e in log if e.seq > after_seq]

    async def read_tail(self, session_id: str) -> list[LoopEvent]:
        """From `tail_start` of the newest history compaction on, after the fact-carrying
        events."""
        log = await self.read(session_id)
        index, compaction = next(
            (
                (i, e)
                for i, e in zip(range(len(log) - 1, -1, -1), reversed(log), strict=True)
                if isinstance(e, Compaction) and e.scope == "history"
            ),
            (None, None),
        )
        if index is None or compaction is None:
            return log
        run = next((log[i] for i in range(index, -1, -1) if isinstance(log[i], RunStarted)), None)
        first = tail_start(compaction, run.seq if run is not None else compaction.seq)
        start = next(i for i, e in enumerate(log) if e.seq >= first)
        return [e for e in log[:start] if carries_facts(e)] + log[start:]

    @asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        """Exclusive use of the session while a turn runs (this process only)."""
        if session_id in self._claimed:
            raise SessionOwned(session_id, f"this process (pid {os.getpid()})")
        self._claimed.add(session_id)
        try:
            yield
        finally:
            self._claimed.discard(session_id)

    async def get(self, session_id: str) -> SessionRecord | None:
        return self._records.get(session_id)

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        records = sorted(
            (
                r
                for r in self._records.values()
                if (cwd is None or r.cwd == cwd) and (user is None or r.user == user)
            ),
            key=lambda r: (r.updated_at, r.session_id),
            reverse=True,
        )
        if cursor is not None:
            after = decode_cursor(cursor)
            records = [r for r in records if (r.updated_at, r.session_id) < after]
        page = tuple(records[:limit])
        next_cursor = encode_cursor(page[-1]) if len(records) > limit and page else None
        return SessionPage(records=page, next_cursor=next_cursor)

    async def adopt(self, session_id: str, user: str) -> bool:
        """Give an ownerless session to `user` (`storage.adopt_session`)."""
        record = self._records.get(session_id)
        if record is None:
            raise SessionNotFound(session_id)
        if record.user is None:
            self._records[session_id] = replace(record, user=user)
            return True
        return record.user == user

    async def delete(self, session_id: str) -> bool:
        self._events.pop(session_id, None)
        return self._records.pop(session_id, None) is not None
