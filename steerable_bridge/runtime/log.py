"""The session log: the one append-only, sequence-numbered record of a session.

`SessionLog.record(cls, run_id, **fields)` builds the event with the next `seq` and the
current time and appends it; nothing else assigns sequence numbers. Readers get `view()`, a
read-only snapshot fixed at the length it had when taken (appends after it stay invisible to
it). Everything the model sees is a projection of this log (`projection.py`); the loop keeps
no second transcript. Events reach the `SessionStore` in batches on `commit()`; the loop
commits at structural events and at least every `commit_interval_s` during streaming.
A model request is logged sharing what it has in common with the one before (`_shared`):
each step's request repeats the whole history, freshly projected, so a log that kept each
copy would hold the conversation once per step; it holds it once.
When the store refuses a batch because an event in it cannot be encoded (text with a lone
UTF-16 surrogate that slipped past the edges, `surrogates.py`), `commit` stores that event
repaired instead of retrying it forever, and notes it in `repairs`; the running turn then
fails with `internal_error` (`recorder.py`) and the session stays usable.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import anyio

from steerable_bridge.runtime import codec
from steerable_bridge.runtime.events import EventBase, LoopEvent, ModelRequestEvent
from steerable_bridge.runtime.model import ModelRequest
from steerable_bridge.runtime.projection import History
from steerable_bridge.runtime.storage import SessionStore
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
        self._request: ModelRequest | None = None
        """The newest logged request that is not a one-off: the next one shares with it."""
        self.repairs: list[str] = []
        """Events `commit` found unencodable and stored repaired (a turn fails on them)."""
        self.history = History()
        """The model's history of every event held, kept as they are appended (a cache of
        the log: `projection.history_entries(self.view())` gives the same)."""
        for event in events:
            self._check(event)
            self._events.append(event)
            self._next_seq = event.seq + 1
            self._note(event)

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def __len__(self) -> int:
        return len(self._events)

    def view(self) -> LogView:
        """A read-only snapshot of the log as it is now."""
        return LogView(self._events, len(self._events))

    def record(self, cls: type[E], run_id: str, **fields: Any) -> E:
        """Build an event of type `cls` with the next seq and now's timestamp, and append it.
        A model request's messages, system prompt and tools equal to the previous request's
        are that request's objects (the event equals the one asked for)."""
        if cls is ModelRequestEvent:
            request = fields.get("request")
            if isinstance(request, ModelRequest):
                fields["request"] = _shared(request, self._request)
        ts = time.time_ns() // 1_000_000  # `now_ms()`, without the call: one per event
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
            self.history = History().extend(self._events)
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
