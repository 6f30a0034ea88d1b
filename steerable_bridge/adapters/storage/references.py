"""Model requests stored by reference, and their exact rebuilding on read.

Every model request repeats the history its session already logged: the messages of the
previous request, the tool results and user prompts just logged as events. `RequestWriter`
(one per session, in the store that appends) stores a request's messages as a list of
items (record format 3): a JSON object is a message written out; `[a, b]` stands for the
messages a..b-1 of the base request (`refs.base`, the session's previous request); an
integer is the seq of an event whose own message (`projection.event_message`: a tool result,
a user prompt, a hook's note, a compaction summary) it is; `["from", a, b]` (format 5) is the
assistant message the events a..b make (one model call's deltas and tool calls, through its
`model_response`), so an answer is stored once, in its deltas. A read that starts after a..b
fetches those rows (`Resolver.block`). A reference is written only when
the message it stands for is equal to the one in the request, so the rebuilt request is the
logged one, exactly. A system prompt and tools equal to the base's are kept as digests; a
request without a base (after a compaction) quotes them from the newest request whose row
holds them written out (`system_at` / `tools_at`: that seq and a digest), a row a read
fetches but only quotes from, never decodes.
Format 2's `request_ref` (a base and a prefix length) still reads.

Reads stay bounded: the first request after a history compaction has no base (a chain of
bases never crosses a compaction), and event references only name events after the newest
history compaction's `through_seq`, so a store's tail read (which starts at or before
`through_seq + 1`) holds every row its requests need. `Resolver` rebuilds requests from the
rows a store read, and names (`missing`) the rows a partial read did not include so the
store can fetch them (a read after a seq, a log another process wrote). A store that reads
a session it has no writer for (a reload: a new process, or one that forgot the session)
starts one from what it read (`RequestWriter.resumed`), so the first request after a reload
is stored by reference too. Nothing here touches a database.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from pydantic import ValidationError

from steerable_bridge.adapters.storage.formats import (
    BODY_FORMAT,
    FORMAT,
    REF_KEYS,
    RUN_FORMAT,
    Row,
    check_readable,
    corrupt,
    decode_event,
    encode_body,
    is_reference,
    is_run,
    short,
    upgraded,
    with_envelope,
)
from steerable_bridge.adapters.storage.runs import as_run, unfold
from steerable_bridge.adapters.storage.step_events import StepEvents
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.encoding.codec import event_from_jsonable
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

__all__ = ["MAX_SOURCES", "STEP", "RequestWriter", "Resolver", "resume_writer"]

MAX_SOURCES = 4096
"""Messages of recent events a writer remembers per session (the oldest go first)."""

MAX_STEP = 100_000
"""Events of one model call a writer keeps to name its assistant message at most."""

_UNANSWERED = (StepFinished, RunFinished, RunFailed)
"""Events that end a model call's step before its `model_response` came (a cancelled or
failed call: its response comes after the call, before its step ends): the events kept to
name its message can never be used, and must not outlive the run (a writer outlives it, in
the store's cache, so they would stay in memory as long as the session does)."""

STEP = "from"
"""The tag of a message item `["from", first, last]`: the one assistant message that the
events first..last (after a request, through its `model_response`) make, exactly as
`projection.history_entries` makes it (format 5)."""


def _first(source: int | tuple[int, int]) -> int:
    return source[0] if isinstance(source, tuple) else source


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _tools_digest(tools: tuple[ToolSpec, ...]) -> str:
    return _digest(json.dumps([[t.name, t.description, t.parameters_json] for t in tools]))


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
    def resumed(cls, events: Sequence[LoopEvent]) -> RequestWriter:
        """The writer of a session whose stored log ends with `events` (read back, in seq
        order): its base is the newest request, unless a history compaction came after it,
        and it knows the messages of the events after that. What it cannot know — which
        older row holds a system prompt written out — it leaves unset: the next request
        without a base writes its own out."""
        writer = cls()
        start = 0
        for index in range(len(events) - 1, -1, -1):
            event = events[index]
            if isinstance(event, ModelRequestEvent) or (
                isinstance(event, Compaction) and event.scope == "history"
            ):
                start = index
                break
        for event in events[start:]:
            writer.note(event)
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
            refs["system"] = _digest(new.system)
            return dataclasses.replace(slim, system="")
        if self.system_at is not None and self.system_at[1] == new.system and new.system:
            refs["system_at"] = [self.system_at[0], _digest(new.system)]
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
            refs["tools"] = _tools_digest(new.tools)
            return dataclasses.replace(slim, tools=())
        if self.tools_at is not None and self.tools_at[1] == new.tools and new.tools:
            refs["tools_at"] = [self.tools_at[0], _tools_digest(new.tools)]
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
    the read kept folded are expanded from the newest request on (what the writer reads)."""
    if events and entry_last_seq(events[-1]) == last_seq and writers.peek(session_id) is None:
        start = 0
        for index in range(len(events) - 1, -1, -1):
            event = entry_event(events[index])
            if isinstance(event, ModelRequestEvent) or (
                isinstance(event, Compaction) and event.scope == "history"
            ):
                start = index
                break
        tail: list[LoopEvent] = []
        for entry in events[start:]:
            if isinstance(entry, DeltaRun):
                tail += entry.events()
            else:
                tail.append(entry)
        writers.put(session_id, RequestWriter.resumed(tail))


def kept(events: list[Entry], from_seq: int) -> list[Entry]:
    """A row's events a read returns: a run's deltas from `from_seq` on (a read selects
    a run by its last seq; a run kept folded that starts below it is expanded), every
    other row's event."""
    if len(events) == 1 and isinstance(events[0], DeltaRun) and events[0].seq < from_seq:
        return list(events[0].events(from_seq - 1))
    if len(events) > 1 and entry_event(events[0]).seq < from_seq:
        return [event for event in events if entry_event(event).seq >= from_seq]
    return events


def _seq(event: LoopEvent) -> int:
    return event.seq


class Resolver:
    """Decodes one session's rows in seq order, rebuilding requests stored by reference.
    `missing(rows)` names rows the read did not include that they refer to; put those in
    `extra` before decoding."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._session_json = json.dumps(session_id)
        self.requests: dict[int, ModelRequest] = {}
        self.messages: dict[int, Message] = {}
        self.extra: dict[int, Row] = {}
        self.literals: dict[int, Row] = {}
        """Fetched rows read only for the system prompt or tools they hold written out."""
        self._literal_only: set[int] = set()
        self._parsed: dict[int, dict[str, Any]] = {}
        self.events: list[Entry] = []
        """Every event decoded so far, in seq order (`extra` rows' and a run's deltas
        below a read's start too; runs kept folded when the read asked for it): what
        `STEP` items are rebuilt from."""
        self._held_from: int | None = None
        """The lowest seq from which on every row is held (read or fetched by `block`)."""

    def missing(self, rows: Iterable[Row]) -> set[int]:
        """Seqs the rows (and the fetched `extra`) refer to that neither they nor the rows
        decoded so far hold. A row wanted only for the system prompt or tools it holds is
        taken out of `extra` once fetched: it is read, never decoded (so never needs more)."""
        rows = list(rows)
        for seq in list(self._literal_only):
            if seq in self.extra:
                self.literals[seq] = self.extra.pop(seq)
                self._literal_only.discard(seq)
        have = {row[0] for row in rows} | self.extra.keys() | self.requests.keys()
        have |= self.messages.keys()
        need: set[int] = set()
        quoted: set[int] = set()
        for row in [*rows, *self.extra.values()]:
            if is_reference(row):
                full, literal = self._refers_to(row)
                need |= {seq for seq in full if seq not in have}
                quoted |= {seq for seq in literal if seq not in have and seq not in self.literals}
        self._literal_only |= quoted - need
        return need | quoted

    def block(self, rows: Iterable[Row], start: int) -> tuple[int, int] | None:
        """The seqs (first, last) of the rows to fetch into `extra` so that every `STEP`
        item of the rows (and of `extra`) can be rebuilt, given that the read holds every
        row from seq `start` on; None when nothing more is needed. Each call assumes the
        caller fetches what the previous one named."""
        held = start if self._held_from is None else self._held_from
        lowest = held
        for row in [*rows, *self.extra.values()]:
            if not is_reference(row) or (row[1] or 0) < RUN_FORMAT:
                continue
            items = self._parse(row).get("request", {}).get("messages", ())
            for item in items if isinstance(items, list) else ():
                if isinstance(item, list) and len(item) == 3 and type(item[1]) is int:
                    lowest = min(lowest, item[1])
        self._held_from = lowest
        return (lowest, held - 1) if lowest < held else None

    def decode_all(self, rows: Iterable[Row], from_seq: int = 0) -> list[LoopEvent]:
        """The rows' events, in their order (seq order); `extra` rows are decoded where
        their seq falls and left out of the result, and so are the deltas of a run below
        `from_seq` (`runs.py`)."""
        wanted = list(rows)
        keys = {row[0] for row in wanted}
        merged = sorted(
            [(row, False) for row in wanted]
            + [(row, True) for s, row in self.extra.items() if s not in keys]
        )
        self.extra.clear()
        out: list[LoopEvent] = []
        for row, extra in merged:
            events = self.decode_row(row)
            if not extra:
                out += cast(list[LoopEvent], kept(list(events), from_seq))
        return out

    def decode_row(self, row: Row) -> list[LoopEvent]:
        """One row's events (rows must come in seq order): one, or a run's deltas; noted
        in `events`."""
        return cast(list[LoopEvent], self.decode_entries(row, runs=False))

    def decode_entries(self, row: Row, *, runs: bool = True) -> list[Entry]:
        """`decode_row`, with a run row as one `DeltaRun` (`runs`) instead of its deltas."""
        events: list[Entry]
        if is_run(row[1], row[5]):
            check_readable(self._what(row[0]), row[1])
            events = [as_run(self.session_id, row)] if runs else list(unfold(self.session_id, row))
        else:
            events = [self.decode(row)]
        self.events += events
        return events

    def decode(self, row: Row) -> LoopEvent:
        """One row's event (rows must come in seq order; a run: `decode_row`)."""
        event = self._rebuild(row) if is_reference(row) else decode_event(self.session_id, row)
        self.remember(event)
        return event

    def remember(self, event: LoopEvent) -> None:
        """Note what later rows may refer to in an event decoded elsewhere (in bulk,
        `decoding.py`) or here: its request, its message."""
        if isinstance(event, ModelRequestEvent):
            self.requests[event.seq] = event.request
        message = event_message(event)
        if message is not None:
            self.messages[event.seq] = message

    def _what(self, seq: int) -> str:
        return f"event seq {seq} of session {self.session_id}"

    def _parse(self, row: Row) -> dict[str, Any]:
        seq = row[0]
        parsed = self._parsed.get(seq)
        if parsed is None:
            found = check_readable(self._what(seq), row[1])
            try:
                text = with_envelope(self._session_json, row) if found >= BODY_FORMAT else row[5]
                parsed = upgraded(text, found)
                if not isinstance(parsed.get(REF_KEYS[found], {}), dict):
                    raise ValueError("its request reference is not an object")
            except (ValueError, UnicodeDecodeError) as err:
                raise corrupt(self._what(seq), short(err)) from None
            self._parsed[seq] = parsed
        return parsed

    def _refers_to(self, row: Row) -> tuple[set[int], set[int]]:
        """(rows the row needs decoded, rows it only quotes a system prompt or tools of)."""
        parsed, found = self._parse(row), row[1] or 0
        ref = parsed.get(REF_KEYS[found])
        if ref is None:
            return set(), set()
        try:
            if found < BODY_FORMAT:
                return {int(ref["base_seq"])}, set()
            seqs = {int(ref["base"])} if ref.get("base") is not None else set()
            items = parsed.get("request", {}).get("messages", ())
            quoted = {int(ref[key][0]) for key in ("system_at", "tools_at") if key in ref}
            return seqs | {int(i) for i in items if isinstance(i, int)}, quoted
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise corrupt(self._what(row[0]), short(err)) from None

    def _rebuild(self, row: Row) -> LoopEvent:
        seq, found = row[0], row[1] or 0
        what = self._what(seq)
        parsed = self._parse(row)
        self._parsed.pop(seq, None)
        stored: dict[str, Any] | None = parsed.pop(REF_KEYS[found], None)
        ref = stored or {}
        try:
            slim, messages, base = self._slim(seq, found, parsed, stored, ref)
        except KeyError as err:
            raise corrupt(what, f"it refers to {err}, which cannot be read") from None
        except (ValidationError, ValueError, TypeError, AttributeError) as err:
            raise corrupt(what, short(err)) from None
        if slim.seq != seq or slim.session_id != self.session_id:
            raise corrupt(what, f"its JSON says session {slim.session_id} seq {slim.seq}")
        request = slim.request
        system, tools = self._header(seq, ref, base, request)
        full = dataclasses.replace(request, messages=messages, system=system, tools=tools)
        return dataclasses.replace(slim, request=full)

    def _slim(
        self,
        seq: int,
        found: int,
        parsed: dict[str, Any],
        stored: dict[str, Any] | None,
        ref: dict[str, Any],
    ) -> tuple[ModelRequestEvent, tuple[Message, ...], ModelRequest | None]:
        """The request event as its row holds it, its messages in full, and its base."""
        old = found < BODY_FORMAT
        base_seq = ref.get("base_seq" if old else "base")
        base = self._base(seq, base_seq) if base_seq is not None else None
        items = None
        if stored is not None and not old:
            items = parsed["request"].get("messages", [])
        if items is not None:
            parsed["request"]["messages"] = [i for i in items if isinstance(i, dict)]
        slim = event_from_jsonable(parsed)
        if not isinstance(slim, ModelRequestEvent):
            raise ValueError("it is not a model request")
        messages = slim.request.messages
        if items is not None:
            messages = self._messages(seq, items, messages, base)
        elif stored is not None:  # format 2: a prefix of the base, then what is new
            prefix = int(ref["prefix"])
            if base is None or not 0 <= prefix <= len(base.messages):
                raise ValueError("its prefix does not fit the request it extends")
            messages = base.messages[:prefix] + messages
        return slim, messages, base

    def _header(
        self,
        seq: int,
        ref: dict[str, Any],
        base: ModelRequest | None,
        request: ModelRequest,
    ) -> tuple[str, tuple[ToolSpec, ...]]:
        """The system prompt and tools of the request `ref` (its row's references) names."""
        what = self._what(seq)
        system = base.system if base is not None and "system" in ref else request.system
        tools = base.tools if base is not None and "tools" in ref else request.tools
        if base is None and ("system" in ref or "tools" in ref):
            raise corrupt(what, "it refers to the system prompt or tools of no request")
        try:
            if "system_at" in ref:
                system = self._quoted(seq, ref["system_at"][0]).system
            if "tools_at" in ref:
                tools = self._quoted(seq, ref["tools_at"][0]).tools
        except KeyError as err:
            raise corrupt(what, f"it refers to {err}, which cannot be read") from None
        except (ValidationError, ValueError, TypeError, AttributeError, IndexError) as err:
            raise corrupt(what, short(err)) from None
        if (
            ("system" in ref and ref["system"] != _digest(system))
            or ("tools" in ref and ref["tools"] != _tools_digest(tools))
            or ("system_at" in ref and ref["system_at"][1] != _digest(system))
            or ("tools_at" in ref and ref["tools_at"][1] != _tools_digest(tools))
        ):
            raise corrupt(what, "the system prompt or tools it refers to do not match")
        return system, tools

    def _step(self, seq: int, first: object, last: object) -> Message:
        """The one assistant message the events first..last make (a `STEP` item)."""
        if not (type(first) is int and type(last) is int and 0 <= first <= last < seq):
            raise ValueError(f"its step {first!r}..{last!r} is not a run of earlier seqs")
        events = self.events
        at = bisect.bisect_right(events, first - 1, key=entry_last_seq)
        span: list[LoopEvent] = []
        expected = first
        for entry in events[at:]:
            if entry_event(entry).seq > last:
                break
            if isinstance(entry, DeltaRun) and entry.seq < first:
                entry = entry.coalesced_after(first - 1)
            if entry_event(entry).seq != expected or entry_last_seq(entry) > last:
                raise KeyError(f"events {first}..{last}")
            span.append(entry_event(entry))
            expected = entry_last_seq(entry) + 1
        if expected != last + 1:
            raise KeyError(f"events {first}..{last}")
        try:
            entries = history_entries(span)
        except ProjectionError as err:
            raise ValueError(str(err)) from None
        if len(entries) != 1:
            raise ValueError(f"events {first}..{last} make {len(entries)} messages, not one")
        return entries[0][1]

    def _quoted(self, seq: int, at: object) -> ModelRequest:
        """The request at `at` as far as its row holds it written out (system prompt and
        tools), without decoding that row when it was fetched only for them."""
        if not isinstance(at, int) or at >= seq:
            raise ValueError(f"it quotes {at!r}, which is not an earlier seq")
        known = self.requests.get(at)
        if known is not None:
            return known
        row = self.literals[at]
        text = with_envelope(self._session_json, row) if (row[1] or 0) >= BODY_FORMAT else row[5]
        request = json.loads(text)["request"]
        tools = tuple(
            ToolSpec(
                name=str(t["name"]),
                description=str(t["description"]),
                parameters_json=str(t["parameters_json"]),
            )
            for t in request.get("tools", ())
        )
        return ModelRequest(model="", system=str(request["system"]), messages=(), tools=tools)

    def _base(self, seq: int, base_seq: object) -> ModelRequest:
        if not isinstance(base_seq, int) or base_seq >= seq:
            raise ValueError(f"its base {base_seq!r} is not an earlier seq")
        return self.requests[base_seq]

    def _messages(
        self,
        seq: int,
        items: list[Any],
        written: tuple[Message, ...],
        base: ModelRequest | None,
    ) -> tuple[Message, ...]:
        literal = iter(written)
        # the base's messages a leading `[a, b]` names (most requests: `[0, n]`, the whole
        # base) stay the one slice, not copied into `messages` and out again
        head: tuple[Message, ...] = ()
        messages: list[Message] = []
        for item in items:
            if isinstance(item, dict):
                messages.append(next(literal))
            elif isinstance(item, int) and not isinstance(item, bool) and 0 <= item < seq:
                messages.append(self.messages[item])
            elif isinstance(item, list) and len(item) == 3 and item[0] == STEP:
                messages.append(self._step(seq, item[1], item[2]))
            elif (
                isinstance(item, list)
                and base is not None
                and len(item) == 2
                and isinstance(item[0], int)
                and not isinstance(item[0], bool)
                and isinstance(item[1], int)
                and not isinstance(item[1], bool)
                and 0 <= item[0] < item[1] <= len(base.messages)
            ):
                if head or messages:
                    messages.extend(base.messages[item[0] : item[1]])
                else:
                    head = base.messages[item[0] : item[1]]
            else:
                raise ValueError(f"message item {item!r} refers to nothing it can read")
        return head + tuple(messages) if head else tuple(messages)
