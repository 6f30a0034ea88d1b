"""The request-by-reference writer: one per session, in the store that appends.

`RequestWriter.body(event)` returns the data a store writes for an event; for a model
request, its messages as the items `references.py` describes, naming what the session's
log already holds (the previous request, the events whose messages it repeats, the events
an assistant message was streamed in) wherever the named message equals the request's.
Reads stay bounded because the writer never names across a history compaction: the first
request after one has no base, and event references only name events after its
`through_seq`, so a store's tail read holds every row its requests need. A store that reads
a session it has no writer for (a reload: a new process, or one that forgot the session)
starts one from what it read (`resume_writer`, `RequestWriter.resumed`), so the first
request after a reload is stored by reference too. Nothing here touches a database.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from steerable_bridge.adapters.storage.formats import FORMAT, REF_KEYS, encode_body
from steerable_bridge.adapters.storage.references import STEP, digest, tools_digest
from steerable_bridge.adapters.storage.step_events import StepEvents
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.events import (
    Compaction,
    LoopEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    RunFailed,
    RunFinished,
    StepFinished,
)
from steerable_bridge.runtime.model_context.projection import (
    ProjectionError,
    event_message,
    history_entries,
)
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.session_log.delta_runs import (
    DeltaRun,
    Entry,
    entry_event,
    entry_last_seq,
)
from steerable_bridge.runtime.values import Message

__all__ = ["MAX_SOURCES", "RequestWriter", "resume_writer"]

MAX_SOURCES = 4096
"""Messages of recent events a writer remembers per session (the oldest go first)."""

MAX_STEP = 100_000
"""Events of one model call a writer keeps to name its assistant message at most."""

_UNANSWERED = (StepFinished, RunFinished, RunFailed)
"""Events that end a model call's step before its `model_response` came (a cancelled or
failed call: its response comes after the call, before its step ends): the events kept to
name its message can never be used, and must not outlive the run (a writer outlives it, in
the store's cache, so they would stay in memory as long as the session does)."""


def _first(source: int | tuple[int, int]) -> int:
    return source[0] if isinstance(source, tuple) else source


def _key(message: Message) -> Message | None:
    """The message as a dict key (None when one of its values cannot be hashed)."""
    try:
        hash(message)
    except TypeError:
        return None
    return message


class RequestWriter:
    """One session's write side: the last stored request and the messages recent events
    added. `body(event)` is the data column of each event appended, in seq order; a
    store drops the writer when an append fails (the next request is then written whole)."""

    def __init__(self) -> None:
        self.next_seq: int | None = None
        self.previous: ModelRequestEvent | None = None
        """The base of the next request (None: the next one is a root)."""
        self.sources: dict[Message, int | tuple[int, int]] = {}
        """Messages that events after the newest history compaction added, by value: the
        seq of the event whose own message it is, or the (first, last) seqs of the events
        after a request that make one assistant message (`STEP`)."""
        self._step: StepEvents | None = None
        """The events since the last request seen, deltas held as text (None: no request
        seen since a gap)."""
        self.system_at: tuple[int, str] | None = None
        self.tools_at: tuple[int, tuple[ToolSpec, ...]] | None = None
        """The newest request whose row holds its system prompt / tools written out: a
        request without a base (after a compaction) refers to them there."""

    @classmethod
    def resumed(cls, events: Sequence[Entry]) -> RequestWriter:
        """The writer of a session whose stored log ends with `events` (read back, in seq
        order; a run of deltas kept folded taken in whole, `note_run`): its base is the
        newest request, unless a history compaction came after it, and it knows the messages
        of the events after that. What it cannot know — which
        older row holds a system prompt written out — it leaves unset: the next request
        without a base writes its own out."""
        writer = cls()
        start = 0
        for index in range(len(events) - 1, -1, -1):
            event = entry_event(events[index])
            if isinstance(event, ModelRequestEvent) or (
                isinstance(event, Compaction) and event.scope == "history"
            ):
                start = index
                break
        for entry in events[start:]:
            if isinstance(entry, DeltaRun):
                writer.note_run(entry)
            else:
                writer.note(entry)
        return writer

    @property
    def step_events(self) -> int:
        """Events of the current model call kept to name its message (0 between calls)."""
        return self._step.count if self._step is not None else 0

    def note(self, event: LoopEvent) -> None:
        """Take in an event stored without `body` (a delta folded into a run, or one read
        back): the state `body` keeps, without encoding anything."""
        self._follow(event)
        if isinstance(event, ModelRequestEvent):
            self.previous = event
        else:
            self._observe(event)

    def note_run(self, run: DeltaRun) -> None:
        """`note` of each of the run's deltas in turn (a run read back folded), without
        making them: a delta only moves the writer on and joins the model call's events."""
        if self.next_seq is not None and run.seq != self.next_seq:
            self.previous, self.sources = None, {}  # events written elsewhere came between
            self._step = None
        self.next_seq = run.last_seq + 1
        if self._step is not None:
            self._step.add_run(run)
            if self._step.count > MAX_STEP:
                self._step = None

    def body(self, event: LoopEvent) -> str:
        self._follow(event)
        if isinstance(event, ModelRequestEvent):
            text = self._request(event)
            self.previous = event
            return text
        self._observe(event)
        return encode_body(event)

    def _follow(self, event: LoopEvent) -> None:
        if self.next_seq is not None and event.seq != self.next_seq:
            self.previous, self.sources = None, {}  # events written elsewhere came between
            self._step = None
        self.next_seq = event.seq + 1
        if isinstance(event, ModelRequestEvent):
            self._step = StepEvents()
        elif self._step is not None:
            self._step.add(event)
            if isinstance(event, ModelResponseEvent):
                self._end_step(self._step)
                self._step = None
            elif isinstance(event, _UNANSWERED) or self._step.count > MAX_STEP:
                self._step = None

    def _end_step(self, step: StepEvents) -> None:
        """Remember the assistant message the events of one model call make (when they make
        exactly one), as a `STEP` reference."""
        try:
            entries = history_entries(step.events())
        except ProjectionError:
            return
        if len(entries) == 1 and _key(entries[0][1]) is not None:
            self._add(entries[0][1], (step.first_seq, step.last_seq))

    def _add(self, message: Message, source: int | tuple[int, int]) -> None:
        self.sources.pop(message, None)
        self.sources[message] = source
        if len(self.sources) > MAX_SOURCES:
            del self.sources[next(iter(self.sources))]

    def _observe(self, event: LoopEvent) -> None:
        if isinstance(event, Compaction):
            through = event.through_seq
            if event.scope == "history":
                self.previous = None
            self.sources = {m: s for m, s in self.sources.items() if _first(s) > through}
        message = event_message(event)
        if message is not None and _key(message) is not None:
            self._add(message, event.seq)

    def _request(self, event: ModelRequestEvent) -> str:
        new = event.request
        old = self.previous.request if self.previous is not None else None
        items, literal = self._items(new, old)
        slim = dataclasses.replace(new, messages=tuple(literal))
        refs: dict[str, Any] = {}
        slim = self._system_ref(event, old, slim, refs)
        slim = self._tools_ref(event, old, slim, refs)
        if self.previous is not None and (
            "system" in refs
            or "tools" in refs
            or any(isinstance(i, list) and len(i) == 2 for i in items)
        ):
            refs["base"] = self.previous.seq
        if not refs and all(item is None for item in items):
            return encode_body(event)
        body = json.loads(encode_body(dataclasses.replace(event, request=slim)))
        written = iter(body["request"].get("messages", ()))
        body["request"]["messages"] = [next(written) if i is None else i for i in items]
        body[REF_KEYS[FORMAT]] = refs
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))

    def _items(
        self, new: ModelRequest, old: ModelRequest | None
    ) -> tuple[list[Any], list[Message]]:
        """The message items of `new` (a reference, or None where the message is written
        out) and the messages written out, in order."""
        items: list[Any] = []
        literal: list[Message] = []
        start = 0
        if old is not None and old.messages and new.messages[: len(old.messages)] == old.messages:
            items.append([0, len(old.messages)])
            start = len(old.messages)
        index: dict[Message, int] | None = None
        for message in new.messages[start:]:
            if old is not None and _extends(items, old, message):
                items[-1][1] += 1
                continue
            key = _key(message)
            source = self.sources.get(key) if key is not None else None
            if isinstance(source, tuple):
                items.append([STEP, *source])
                continue
            if source is not None:
                items.append(source)
                continue
            if old is not None and key is not None:
                if index is None:
                    index = _index(old)
                j = index.get(key)
                if j is not None:
                    items.append([j, j + 1])
                    continue
            items.append(None)
            literal.append(message)
        return items, literal

    def _system_ref(
        self,
        event: ModelRequestEvent,
        old: ModelRequest | None,
        slim: ModelRequest,
        refs: dict[str, Any],
    ) -> ModelRequest:
        new = event.request
        if old is not None and new.system == old.system:
            refs["system"] = digest(new.system)
            return dataclasses.replace(slim, system="")
        if self.system_at is not None and self.system_at[1] == new.system and new.system:
            refs["system_at"] = [self.system_at[0], digest(new.system)]
            return dataclasses.replace(slim, system="")
        self.system_at = (event.seq, new.system)
        return slim

    def _tools_ref(
        self,
        event: ModelRequestEvent,
        old: ModelRequest | None,
        slim: ModelRequest,
        refs: dict[str, Any],
    ) -> ModelRequest:
        new = event.request
        if old is not None and new.tools == old.tools:
            refs["tools"] = tools_digest(new.tools)
            return dataclasses.replace(slim, tools=())
        if self.tools_at is not None and self.tools_at[1] == new.tools and new.tools:
            refs["tools_at"] = [self.tools_at[0], tools_digest(new.tools)]
            return dataclasses.replace(slim, tools=())
        self.tools_at = (event.seq, new.tools)
        return slim


def _extends(items: list[Any], old: ModelRequest, message: Message) -> bool:
    """Whether `message` continues the range of `old`'s messages the last item names."""
    last = items[-1] if items else None
    return (
        isinstance(last, list)
        and len(last) == 2
        and last[1] < len(old.messages)
        and old.messages[last[1]] == message
    )


def _index(old: ModelRequest) -> dict[Message, int]:
    """The first position of each hashable message of `old`."""
    index: dict[Message, int] = {}
    for i, m in enumerate(old.messages):
        if _key(m) is not None:
            index.setdefault(m, i)
    return index


def resume_writer(
    writers: IdleCache[str, RequestWriter],
    session_id: str,
    events: Sequence[Entry],
    last_seq: int,
) -> None:
    """Give a session that has no writer in `writers` (a store's) one resumed from a read
    of its log that ends at the stored `last_seq` (`RequestWriter.resumed`); a read that
    stops short of the end, or a session that has a writer, changes nothing. Runs of deltas
    the read kept folded are taken in as runs (`RequestWriter.note_run`), never expanded."""
    if events and entry_last_seq(events[-1]) == last_seq and writers.peek(session_id) is None:
        writers.put(session_id, RequestWriter.resumed(events))
