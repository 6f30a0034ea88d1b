"""Record format versions of stored events and session records, and their in-memory upgrades.

Every row a durable store writes carries `FORMAT`, the version of the JSON in its data
column. Reading goes through `decode_event` / `decode_record`: a row stamped with this
build's version decodes directly; a row without a stamp (written before stamps existed,
format 0) or with an older one is upgraded step by step in memory — the stored row is never
rewritten, the log stays append-only; a row from a newer build is refused with
`format_too_new`, naming the remedy (upgrade steerable-bridge). A row that does not decode is
an error naming its seq (`corrupt_record`), never skipped. Used by `sqlite.py` and the
`sessions` command; it must never write anything.

Format 2 stores a model request by reference (`encode_event`): when its history extends an
earlier request of the session, the row holds only the new messages, that request's seq,
and digests of the system prompt and tools (the text only when it changed), so a long
session's log grows with what is new rather than with the whole history every step.
`Resolver` rebuilds the exact request from the rows it has read (fetching a base row a tail
read did not include); `decode_event` alone refuses such a row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from steerable_bridge.runtime.codec import event_from_json, event_from_jsonable, event_to_json
from steerable_bridge.runtime.events import Compaction, LoopEvent, ModelRequestEvent
from steerable_bridge.runtime.model import ToolSpec
from steerable_bridge.runtime.storage import SessionRecord, StoreError

__all__ = [
    "FORMAT",
    "REF_KEY",
    "UPGRADES",
    "Resolver",
    "decode_event",
    "decode_record",
    "encode_event",
    "encode_record",
    "format_too_new",
]

FORMAT = 2
"""The record format this build writes and the newest it reads."""

REF_KEY = "request_ref"
"""The key of a model request stored by reference (format 2)."""

JsonObject = dict[str, Any]


def _v0_to_v1(data: JsonObject) -> JsonObject:
    """Format 0 is the unstamped JSON of the first durable builds: the same shape as 1."""
    return data


def _v1_to_v2(data: JsonObject) -> JsonObject:
    """Format 2 only adds requests stored by reference; a format-1 row is a full event."""
    return data


UPGRADES: dict[int, Callable[[JsonObject], JsonObject]] = {0: _v0_to_v1, 1: _v1_to_v2}
"""`UPGRADES[n]` turns format-n JSON into format n + 1; a new format adds one entry."""


def format_too_new(what: str, found: int) -> StoreError:
    return StoreError(
        "format_too_new",
        f"{what} was written by a newer steerable-bridge (record format {found}; this build"
        f" reads up to {FORMAT}); upgrade steerable-bridge to open it — nothing was changed",
    )


def _upgrade(data: JsonObject, found: int) -> JsonObject:
    for version in range(found, FORMAT):
        data = UPGRADES[version](data)
    return data


def _corrupt(what: str, problem: str) -> StoreError:
    return StoreError(
        "corrupt_record",
        f"{what} cannot be read ({problem}); run `steerable-bridge sessions check` to see"
        " what is damaged and `steerable-bridge sessions export ID` to salvage the rest",
    )


def history_compaction(
    session_id: str, rows: Iterable[tuple[int, int | None, str | bytes]]
) -> Compaction | None:
    """The first `history` compaction among `(seq, format, data)` rows read newest first
    (tool-result folds do not move where a resume starts)."""
    for seq, found, data in rows:
        event = decode_event(session_id, seq, found, data)
        if isinstance(event, Compaction) and event.scope == "history":
            return event
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _tools_digest(tools: tuple[ToolSpec, ...]) -> str:
    return _digest(json.dumps([[t.name, t.description, t.parameters_json] for t in tools]))


def encode_event(event: LoopEvent, previous: ModelRequestEvent | None = None) -> str:
    """The JSON a store keeps for `event`. A model request whose messages extend those of
    `previous` (an earlier request of the session) is stored by reference."""
    if not isinstance(event, ModelRequestEvent) or previous is None:
        return event_to_json(event)
    old, new = previous.request, event.request
    prefix = len(old.messages)
    if previous.seq >= event.seq or new.messages[:prefix] != old.messages:
        return event_to_json(event)
    ref: JsonObject = {"base_seq": previous.seq, "prefix": prefix}
    slim = dataclasses.replace(new, messages=new.messages[prefix:])
    if new.system == old.system:
        slim = dataclasses.replace(slim, system="")
        ref["system"] = _digest(new.system)
    if new.tools == old.tools:
        slim = dataclasses.replace(slim, tools=())
        ref["tools"] = _tools_digest(new.tools)
    text = event_to_json(dataclasses.replace(event, request=slim))
    return f'{text[:-1]},"{REF_KEY}":{json.dumps(ref, separators=(",", ":"))}}}'


def is_reference(data: str | bytes) -> bool:
    """Whether a row holds a model request stored by reference."""
    marker = f'"{REF_KEY}":'
    return marker in data if isinstance(data, str) else marker.encode() in data


Row = tuple[int, int | None, str | bytes]


class Resolver:
    """Decodes one session's rows in seq order, rebuilding requests stored by reference
    from the requests it has seen; `missing(rows)` names base rows to fetch first."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.requests: dict[int, ModelRequestEvent] = {}
        self.extra: dict[int, Row] = {}

    def missing(self, rows: Iterable[Row]) -> set[int]:
        """Seqs of base requests neither among `rows`, nor seen, nor fetched."""
        have = {row[0] for row in rows} | set(self.requests) | set(self.extra)
        need: set[int] = set()
        for row in [*rows, *self.extra.values()]:
            base = self._base(row)
            if base is not None and base not in have:
                need.add(base)
        return need

    def _base(self, row: Row) -> int | None:
        if not is_reference(row[2]):
            return None
        loaded = json.loads(row[2])
        ref = loaded.get(REF_KEY) if isinstance(loaded, dict) else None
        return int(ref["base_seq"]) if isinstance(ref, dict) else None

    def decode(self, row: Row) -> LoopEvent:
        """One row's event (rows must come in seq order, bases first)."""
        seq, found, data = row
        if not is_reference(data):
            event = decode_event(self.session_id, seq, found, data)
        else:
            event = self._rebuild(seq, found, data)
        if isinstance(event, ModelRequestEvent):
            self.requests[seq] = event
        return event

    def decode_all(self, rows: Iterable[Row]) -> list[LoopEvent]:
        return [self.decode(row) for row in rows]

    def _rebuild(self, seq: int, found: int | None, data: str | bytes) -> LoopEvent:
        what = f"event seq {seq} of session {self.session_id}"
        version = 0 if found is None else found
        if version > FORMAT:
            raise format_too_new(what, version)
        try:
            loaded = json.loads(data)
            ref = loaded.pop(REF_KEY)
            base_seq, prefix = int(ref["base_seq"]), int(ref["prefix"])
            if base_seq not in self.requests and base_seq in self.extra:
                self.decode(self.extra.pop(base_seq))
            base = self.requests[base_seq].request
            slim = event_from_jsonable(loaded)
        except KeyError:
            raise _corrupt(what, "the request it extends cannot be read") from None
        except (ValidationError, ValueError, TypeError, UnicodeDecodeError) as err:
            raise _corrupt(what, _short(err)) from None
        if not isinstance(slim, ModelRequestEvent) or prefix > len(base.messages):
            raise _corrupt(what, "its request reference does not fit the request it extends")
        request = slim.request
        system = base.system if "system" in ref else request.system
        tools = base.tools if "tools" in ref else request.tools
        if ("system" in ref and ref["system"] != _digest(system)) or (
            "tools" in ref and ref["tools"] != _tools_digest(tools)
        ):
            raise _corrupt(what, "the system prompt or tools it refers to do not match")
        messages = base.messages[:prefix] + request.messages
        full = dataclasses.replace(request, messages=messages, system=system, tools=tools)
        return dataclasses.replace(slim, request=full)


def decode_event(session_id: str, seq: int, found: int | None, data: str | bytes) -> LoopEvent:
    """The event stored in one row, upgraded to this build's format; raises StoreError."""
    what = f"event seq {seq} of session {session_id}"
    version = 0 if found is None else found
    if version > FORMAT:
        raise format_too_new(what, version)
    if is_reference(data):
        raise _corrupt(what, "it is a request stored by reference; read it with its session")
    try:
        if version == FORMAT:
            event = event_from_json(data)
        else:
            loaded = json.loads(data)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
            event = event_from_jsonable(_upgrade(loaded, version))
    except (ValidationError, ValueError, UnicodeDecodeError) as err:
        raise _corrupt(what, _short(err)) from None
    if event.seq != seq or event.session_id != session_id:
        raise _corrupt(what, f"its JSON says session {event.session_id} seq {event.seq}")
    return event


def encode_record(record: SessionRecord) -> str:
    """The JSON a store keeps for a session record (format `FORMAT`)."""
    return json.dumps(
        {
            "session_id": record.session_id,
            "cwd": record.cwd,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "title": record.title,
            "model": record.model,
        },
        separators=(",", ":"),
    )


def decode_record(session_id: str, found: int | None, data: str) -> SessionRecord:
    """The session record stored in one row, upgraded; raises StoreError."""
    what = f"the record of session {session_id}"
    version = 0 if found is None else found
    if version > FORMAT:
        raise format_too_new(what, version)
    try:
        loaded = json.loads(data)
        if not isinstance(loaded, dict):
            raise ValueError("not a JSON object")
        fields = _upgrade(loaded, version)
        record = SessionRecord(
            session_id=str(fields["session_id"]),
            cwd=str(fields["cwd"]),
            created_at=int(fields["created_at"]),
            updated_at=int(fields["updated_at"]),
            title=_opt_str(fields.get("title")),
            model=_opt_str(fields.get("model")),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise _corrupt(what, _short(err)) from None
    if record.session_id != session_id:
        raise _corrupt(what, f"its JSON names session {record.session_id}")
    return record


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _short(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 200 else text[:197] + "..."
