"""The request-by-reference reader: rebuilds a session's requests exactly from its rows.

`Resolver(session_id)` decodes one session's rows in seq order (`decode_all`,
`decode_row`), rebuilding each model request stored as the items `references.py`
describes from the requests, events and assistant messages decoded before it. A partial
read (after a seq, or a log another process wrote) may lack rows a request refers to:
`missing(rows)` names them and `block` the run of rows a `STEP` item needs, so the store
fetches those into `extra` first; a row fetched only for the system prompt or tools it
quotes is never decoded. `kept` picks the events of a row a read returns. Nothing here
touches a database.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Iterable
from typing import Any, cast

from pydantic import ValidationError

from steerable_bridge.adapters.storage.formats import (
    BODY_FORMAT,
    REF_KEYS,
    RUN_FORMAT,
    Row,
    check_readable,
    corrupt,
    decode_event,
    is_reference,
    is_run,
    short,
    upgraded,
    with_envelope,
)
from steerable_bridge.adapters.storage.references import STEP, digest, tools_digest
from steerable_bridge.adapters.storage.runs import as_run, unfold
from steerable_bridge.runtime.encoding.codec import event_from_jsonable
from steerable_bridge.runtime.events import LoopEvent, ModelRequestEvent
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

__all__ = ["Resolver", "kept"]


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
        self._digests: dict[int, tuple[object, str]] = {}
        """Each system prompt's or tools' digest, by the id of the object (kept with it)."""
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
            ("system" in ref and ref["system"] != self._digest(system))
            or ("tools" in ref and ref["tools"] != self._digest(tools))
            or ("system_at" in ref and ref["system_at"][1] != self._digest(system))
            or ("tools_at" in ref and ref["tools_at"][1] != self._digest(tools))
        ):
            raise corrupt(what, "the system prompt or tools it refers to do not match")
        return system, tools

    def _digest(self, value: str | tuple[ToolSpec, ...]) -> str:
        """`digest` of a system prompt, `tools_digest` of tools: once per object (every
        request of a session refers to the one its base holds)."""
        known = self._digests.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        found = digest(value) if isinstance(value, str) else tools_digest(value)
        self._digests[id(value)] = (value, found)
        return found

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
