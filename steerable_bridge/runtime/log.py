"""The session log: the one append-only, sequence-numbered record of a session.

`SessionLog.record(cls, run_id, **fields)` builds the event with the next `seq` and the
current time and appends it; nothing else assigns sequence numbers. Readers get `view()`, a
read-only snapshot fixed at the length it had when taken (appends after it stay invisible to
it). Everything the model sees is a projection of this log (`projection.py`); the loop keeps
no second transcript. Events reach the `SessionStore` in batches on `commit()`; the loop
commits at structural events and at least every `commit_interval_s` during streaming.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import anyio

from steerable_bridge.runtime.events import EventBase, LoopEvent
from steerable_bridge.runtime.storage import SessionStore

__all__ = ["LogView", "SessionLog", "now_ms"]

E = TypeVar("E", bound=EventBase)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (the `ts` of every event)."""
    return time.time_ns() // 1_000_000


class LogView(Sequence[LoopEvent]):
    """A read-only, fixed-length snapshot of a log."""

    __slots__ = ("_events", "_length")

    def __init__(self, events: list[LoopEvent], length: int) -> None:
        self._events = events
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> LoopEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LoopEvent]: ...
    def __getitem__(self, index: int | slice) -> LoopEvent | Sequence[LoopEvent]:
        if isinstance(index, slice):
            return tuple(self._events[: self._length][index])
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("log view index out of range")
        return self._events[index]

    def __iter__(self) -> Iterator[LoopEvent]:
        events = self._events
        for i in range(self._length):
            yield events[i]


class SessionLog:
    """Append-only event log of one session, optionally backed by a store."""

    def __init__(
        self,
        session_id: str,
        events: Sequence[LoopEvent] = (),
        *,
        store: SessionStore | None = None,
    ) -> None:
        self.session_id = session_id
        self._events: list[LoopEvent] = []
        self._pending: list[LoopEvent] = []
        self._store = store
        self._next_seq = 0
        self._commit_lock: anyio.Lock | None = None
        for event in events:
            self._check(event)
            self._events.append(event)
            self._next_seq = event.seq + 1

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def __len__(self) -> int:
        return len(self._events)

    def view(self) -> LogView:
        """A read-only snapshot of the log as it is now."""
        return LogView(self._events, len(self._events))

    def record(self, cls: type[E], run_id: str, **fields: Any) -> E:
        """Build an event of type `cls` with the next seq and now's timestamp, and append it."""
        event = cls(
            session_id=self.session_id, run_id=run_id, seq=self._next_seq, ts=now_ms(), **fields
        )
        self._next_seq += 1
        self._events.append(event)  # type: ignore[arg-type]
        self._pending.append(event)  # type: ignore[arg-type]
        return event

    def append(self, event: LoopEvent) -> None:
        """Append an event built elsewhere (e.g. imported); its seq must be the next one up."""
        self._check(event)
        self._events.append(event)
        self._pending.append(event)
        self._next_seq = event.seq + 1

    def adopt(self, events: Sequence[LoopEvent]) -> None:
        """Add events another process already stored (they are not written again)."""
        if self._pending:
            raise ValueError(
                f"session {self.session_id} has uncommitted events; commit before adopting"
                " events written elsewhere"
            )
        for event in events:
            self._check(event)
            self._events.append(event)
            self._next_seq = event.seq + 1

    def _check(self, event: LoopEvent) -> None:
        if event.session_id != self.session_id:
            raise ValueError(
                f"event seq {event.seq} belongs to session {event.session_id},"
                f" not {self.session_id}"
            )
        if event.seq < self._next_seq:
            raise ValueError(
                f"event seq {event.seq} is not above the log's last seq {self._next_seq - 1};"
                " the log is append-only"
            )

    @property
    def uncommitted(self) -> int:
        return len(self._pending)

    async def commit(self) -> None:
        """Write every uncommitted event to the store (no-op without one)."""
        if not self._pending:
            return
        if self._commit_lock is None:  # fast: an uncontended commit does not yield the loop
            self._commit_lock = anyio.Lock(fast_acquire=True)
        async with self._commit_lock:
            await self._write_pending()

    async def _write_pending(self) -> None:
        count = len(self._pending)
        if self._store is not None and count:
            # Events appended while the write is under way stay pending for the next commit;
            # a failed write keeps the whole batch pending, so nothing is lost.
            await self._store.append(self.session_id, self._pending[:count])
        del self._pending[:count]
