"""The session log: the one append-only, sequence-numbered record of a session.

`SessionLog.record(cls, run_id, **fields)` builds the event with the next `seq` and the
current time and appends it; nothing else assigns sequence numbers. Readers get `view()`, a
read-only snapshot fixed at the length it had when taken (appends after it stay invisible to
it). Everything the model sees is a projection of this log (`projection.py`); the loop keeps
no second transcript. Events reach the `SessionStore` in batches on `commit()`; the loop
commits at structural events and at least every `commit_interval_s` during streaming.
A model request is logged sharing what it has in common with the one before (`_shared`):
each step's request repeats the whole history, freshly projected, so a log that kept each
copy would hold the conversation once per step; it holds it once. Likewise, streamed
deltas the store already holds are kept folded (`fold`, after each commit, and merged to
one `DeltaRun` per message at the end of each turn and on load, `delta_runs.py`), so a
session holds about its text, not an object per token, even while it streams; `view()`
still reads every event as logged, and `view().folded()` reads each run as one coalesced
event for projections.
When the store refuses a batch because an event in it cannot be encoded (text with a lone
UTF-16 surrogate that slipped past the edges, `surrogates.py`), `commit` stores that event
repaired instead of retrying it forever, and notes it in `repairs`; the running turn then
fails with `internal_error` (`recorder.py`) and the session stays usable.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import time
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import anyio

from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import EventBase, LoopEvent, ModelRequestEvent
from steerable_bridge.runtime.model_context.projection import History
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.ports.storage import SessionStore
from steerable_bridge.runtime.session_log.delta_runs import (
    DeltaRun,
    Entry,
    entry_event,
    entry_last_seq,
    fold_entries,
)
from steerable_bridge.runtime.values import Message

__all__ = ["LogView", "SessionLog", "UnencodableEvent", "now_ms"]

E = TypeVar("E", bound=EventBase)

log = logging.getLogger(__name__)


class UnencodableEvent(Exception):
    """A turn logged an event that could not be encoded; it was stored repaired."""

    def __init__(self, notes: list[str]) -> None:
        super().__init__(
            "; ".join(notes) + " — a bug in what produced the text (please report it);"
            " send the prompt again, the session keeps working"
        )


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (the `ts` of every event)."""
    return time.time_ns() // 1_000_000


class LogView(Sequence[LoopEvent]):
    """A read-only, fixed-length snapshot of a log: its events exactly as logged (runs of
    deltas the log holds folded are expanded as they are read). `folded()` gives the same
    log with each such run as its coalesced event, for readers that join deltas anyway."""

    __slots__ = ("_ends", "_entries", "_folded", "_length")

    def __init__(
        self, entries: list[Entry], length: int, ends: array[int] | None = None, folded: int = 0
    ) -> None:
        self._entries = entries
        self._length = length
        self._ends: array[int] = ends if ends is not None else array("q")
        """For each of the first `folded` entries, how many events it and those before it
        hold (the entries after them are one event each)."""
        self._folded = folded

    def _base(self) -> int:
        return self._ends[self._folded - 1] if self._folded else 0

    def __len__(self) -> int:
        return self._base() + self._length - self._folded

    @overload
    def __getitem__(self, index: int) -> LoopEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LoopEvent]: ...
    def __getitem__(self, index: int | slice) -> LoopEvent | Sequence[LoopEvent]:
        if isinstance(index, slice):
            return tuple(list(self)[index])
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("log view index out of range")
        base = self._base()
        if index >= base:
            return self._entries[self._folded + index - base]  # type: ignore[return-value]
        at = bisect.bisect_right(self._ends, index, 0, self._folded)
        entry = self._entries[at]
        if isinstance(entry, DeltaRun):
            return entry.at(index - (self._ends[at - 1] if at else 0))
        return entry

    def __iter__(self) -> Iterator[LoopEvent]:
        entries = self._entries
        for i in range(self._length):
            entry = entries[i]
            if isinstance(entry, DeltaRun):
                yield from entry.events()
            else:
                yield entry

    def folded(self) -> Iterator[LoopEvent]:
        """The log's events with each run of deltas held folded as its coalesced event."""
        entries = self._entries
        for i in range(self._length):
            yield entry_event(entries[i])

    def entries(self) -> Sequence[Entry]:
        """What the log holds: events, and runs of deltas folded (`delta_runs.py`)."""
        return self._entries[: self._length]

    def entries_after(self, seq: int) -> list[Entry]:
        """The entries holding its events above `seq` (the first may begin at or below
        `seq`, when `seq` falls inside a folded run)."""
        at = bisect.bisect_right(self._entries, seq, 0, self._length, key=entry_last_seq)
        return self._entries[at : self._length]

    def after(self, seq: int) -> list[LoopEvent]:
        """Its events above `seq`, exactly as logged, oldest first."""
        out: list[LoopEvent] = []
        for entry in self.entries_after(seq):
            if isinstance(entry, DeltaRun):
                out += entry.events(seq)
            else:
                out.append(entry)
        return out


class SessionLog:
    """Append-only event log of one session, optionally backed by a store."""

    def __init__(
        self,
        session_id: str,
        events: Sequence[Entry] = (),
        *,
        store: SessionStore | None = None,
    ) -> None:
        self.session_id = session_id
        self._events: list[Entry] = []
        self._ends: array[int] = array("q")
        """Cumulative event counts of the first `_folded` entries (`LogView`)."""
        self._folded = 0
        """How many leading entries `fold` has gone over (runs of deltas only there)."""
        self._unmerged: int | None = None
        """Where the folds since the last merging one began (their runs may split a message)."""
        self._pending: list[LoopEvent] = []
        self._store = store
        self._next_seq = 0
        self._ts = 0
        """The last timestamp given (its object is reused by the events of the same ms)."""
        self._commit_lock: anyio.Lock | None = None
        self._request: ModelRequest | None = None
        """The newest logged request that is not a one-off: the next one shares with it."""
        self.repairs: list[str] = []
        """Events `commit` found unencodable and stored repaired (a turn fails on them)."""
        self.history = History()
        """The model's history of every event held, kept as they are appended (a cache of
        the log: `projection.history_entries(self.view())` gives the same)."""
        for entry in events:
            self._check(entry_event(entry))
            self._events.append(entry)
            self._next_seq = entry_last_seq(entry) + 1
        if store is not None:  # the store holds them exactly: memory may fold them
            self.fold()
        for entry in self._events:
            self._note(entry_event(entry))
            if isinstance(entry, DeltaRun):
                self.history.last_seq = entry.last_seq
        self.base = self._contiguous_from()
        """The lowest seq from which on memory holds every event (a log loaded from a
        tail lacks those between the facts it carries and the tail)."""

    def _contiguous_from(self) -> int:
        expected = self._next_seq - 1
        for index in range(len(self._events) - 1, -1, -1):
            entry = self._events[index]
            if entry_last_seq(entry) != expected:
                return expected + 1
            expected = entry_event(entry).seq - 1
        return expected + 1 if self._events else self._next_seq

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def __len__(self) -> int:
        return len(self.view())

    def view(self) -> LogView:
        """A read-only snapshot of the log as it is now."""
        return LogView(self._events, len(self._events), self._ends, self._folded)

    def fold(self, *, merge: bool = True) -> None:
        """Hold each stretch of consecutive deltas of one message the store already has as
        one folded run (`delta_runs.py`): views read the same events, memory holds a fraction.
        Views taken before keep the list they had (a fold builds a new one). A log with no
        store keeps every event as it is (nothing else holds them exactly).

        `commit` folds with `merge` off, after every write: what is stored leaves memory
        within a commit interval, not at the end of the turn, and a message still streaming
        is held as one run per commit, so the text is never joined again and again. A fold
        with `merge` (the end of a turn) goes back over those and makes each message one run."""
        if self._store is None:
            return
        start, stop = self._folded, len(self._events) - len(self._pending)
        if merge and self._unmerged is not None:
            start, self._unmerged = self._unmerged, None
        elif not merge and self._unmerged is None:
            self._unmerged = start
        if stop - start < 2:
            return
        folded = list(fold_entries(self._events[start:stop]))
        ends = self._ends[:start]
        count = ends[-1] if ends else 0
        for entry in folded:
            count += len(entry) if isinstance(entry, DeltaRun) else 1
            ends.append(count)
        self._events = [*self._events[:start], *folded, *self._events[stop:]]
        self._ends = ends
        self._folded = start + len(folded)

    def exact_after(self, seq: int) -> list[LoopEvent] | None:
        """The events after `seq`, exactly as logged, when memory holds all of them (None:
        some lie before `base`; read them from the store)."""
        return None if seq + 1 < self.base else self.view().after(seq)

    def record(self, cls: type[E], run_id: str, **fields: Any) -> E:
        """Build an event of type `cls` with the next seq and now's timestamp, and append it.
        A model request's messages, system prompt and tools equal to the previous request's
        are that request's objects (the event equals the one asked for)."""
        if cls is ModelRequestEvent:
            request = fields.get("request")
            if isinstance(request, ModelRequest):
                fields["request"] = _shared(request, self._request)
        ts = time.time_ns() // 1_000_000  # `now_ms()`, without the call: one per event
        if ts == self._ts:
            ts = self._ts  # one int object per millisecond (events come by the dozen in one)
        else:
            self._ts = ts
        event = cls(session_id=self.session_id, run_id=run_id, seq=self._next_seq, ts=ts, **fields)
        self._next_seq += 1
        self._events.append(event)  # type: ignore[arg-type]
        self._pending.append(event)  # type: ignore[arg-type]
        self._note(event)  # type: ignore[arg-type]
        return event

    def _note(self, event: LoopEvent) -> None:
        self.history.observe(event)
        if isinstance(event, ModelRequestEvent) and not event.request.one_off:
            self._request = event.request

    def append(self, event: LoopEvent) -> None:
        """Append an event built elsewhere (e.g. imported); its seq must be the next one up."""
        self._check(event)
        self._events.append(event)
        self._pending.append(event)
        self._next_seq = event.seq + 1
        self._note(event)

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
            self._note(event)

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
            self.fold(merge=False)

    async def _write_pending(self) -> None:
        count = len(self._pending)
        if self._store is not None and count:
            # Events appended while the write is under way stay pending for the next commit;
            # a failed write keeps the whole batch pending, so nothing is lost — unless an
            # event in it can never be encoded: retried as it is, it would fail every later
            # commit and the session with it, so it is repaired first.
            try:
                await self._store.append(self.session_id, self._pending[:count])
            except Exception:
                if not self._repair(count):
                    raise
                await self._store.append(self.session_id, self._pending[:count])
        del self._pending[:count]

    def _repair(self, count: int) -> bool:
        """Replace each of the first `count` pending events that cannot be encoded with a
        copy whose text is repaired (`codec.repaired`), here and in the log; note each in
        `repairs`. Whether any was."""
        offset = len(self._events) - len(self._pending)
        found = False
        for i in range(count):
            event = self._pending[i]
            if not codec.unencodable(event):
                continue
            fixed = codec.repaired(event)
            self._pending[i] = fixed
            if self._events[offset + i] is event:
                self._events[offset + i] = fixed
            found = True
            note = (
                f"event seq {event.seq} ({event.kind}) held text UTF-8 cannot encode (a lone"
                " UTF-16 surrogate); it was stored with U+FFFD in its place"
            )
            log.error("session %s: %s — a bug in what produced the text", self.session_id, note)
            self.repairs.append(note)
        if found:  # the history was folded from the events as they were
            self.history = History().extend(self.view().folded())
        return found

    def take_repairs(self) -> list[str]:
        """The repairs noted since the last call (see `commit`), now forgotten."""
        notes, self.repairs = self.repairs, []
        return notes


def _shared(new: ModelRequest, old: ModelRequest | None) -> ModelRequest:
    """`new` with each message, and its system prompt and tools, replaced by the equal one
    of `old` where `old` has one (by position first, then by value), so the two share
    them; `new` itself when nothing is shared. Equal values: the request is the same.
    Messages past the end of `old` are the ones the history grew by since, and are not
    looked for (the history the log keeps hands out the same objects step after step, so
    only a rewritten request, by a hook or a compaction, has equal ones elsewhere)."""
    if old is None:
        return new
    known = old.messages
    messages = list(new.messages)
    by_value: dict[Message, Message] | None = None
    changed = False
    for i, message in enumerate(messages):
        if i >= len(known):
            break  # new at the end: the history grew by it (a value `old` lacks)
        if known[i] is message:
            continue
        if known[i] == message:
            messages[i] = known[i]
            changed = True
            continue
        if by_value is None:
            by_value = {}
            for m in known:
                try:
                    by_value.setdefault(m, m)
                except TypeError:  # a value that cannot be hashed: shared by position only
                    continue
        try:
            found = by_value.get(message)
        except TypeError:
            continue
        if found is not None:
            messages[i] = found
            changed = True
    system = old.system if new.system is not old.system and new.system == old.system else None
    tools = old.tools if new.tools is not old.tools and new.tools == old.tools else None
    if not changed and system is None and tools is None:
        return new
    return dataclasses.replace(
        new,
        messages=tuple(messages) if changed else new.messages,
        system=new.system if system is None else system,
        tools=new.tools if tools is None else tools,
    )
