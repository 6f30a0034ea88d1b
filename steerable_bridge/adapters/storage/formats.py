"""Record format versions of stored events and session records, and their in-memory upgrades.

Every row a durable store writes carries `FORMAT`, the version of the JSON in its data
column. Reading goes through `decode_event` / `decode_record`: a row stamped with this
build's version decodes directly; a row without a stamp (written before stamps existed,
format 0) or with an older one is upgraded step by step in memory — the stored row is never
rewritten, the log stays append-only; a row from a newer build is refused with
`format_too_new`, naming the remedy (upgrade steerable-bridge). A row that does not decode is
an error naming its seq (`corrupt_record`), never skipped. Used by the durable stores and
the `sessions` command; it must never write anything.

The formats: 1 is an event's full JSON. 2 adds model requests stored by reference. 3 keeps
in the data column only the event's *body* (`encode_body`): the envelope fields the row
already has as columns (session id, run id, seq, ts, kind) and every field equal to its
default are left out, and put back on read from the columns and the dataclass defaults — so
changing a field's default needs a new format whose upgrade writes the old default in. 4
lets a request quote its system prompt and tools from an earlier request. 5 (this build)
adds rows that hold a run of streamed deltas (`runs.py`; `is_run` tells them apart) and
requests that refer to an assistant message by the events it was streamed in
(`references.STEP`).
Model requests stored by reference (formats 2 to 5) are rebuilt by `request_resolver.Resolver`,
runs are unfolded by `runs.unfold`; `decode_event` alone refuses both.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Literal

from pydantic import ValidationError

from steerable_bridge.runtime.encoding.codec import (
    event_from_json,
    event_from_jsonable,
    event_to_json,
)
from steerable_bridge.runtime.events import Compaction, LoopEvent
from steerable_bridge.runtime.ports.storage import SessionRecord, StoreError

__all__ = [
    "FORMAT",
    "UPGRADES",
    "Row",
    "check_readable",
    "corrupt",
    "decode_event",
    "decode_record",
    "encode_body",
    "encode_record",
    "format_too_new",
    "history_compaction",
    "is_reference",
    "is_run",
    "with_envelope",
    "with_envelopes",
]

FORMAT = 5
"""The record format this build writes and the newest it reads."""

RUN_FORMAT = 5
"""The first format with rows that hold a run of deltas (`runs.py`)."""

BODY_FORMAT = 3
"""The first format whose rows hold only an event's body (`encode_body`)."""

REF_KEYS = {2: "request_ref", 3: "refs", 4: "refs", 5: "refs"}
"""The key that marks a model request stored by reference, per format."""

Row = tuple[int, int | None, str, str, int, "str | bytes"]
"""One stored event as the stores read it: seq, format, kind, run id, ts, data
(`sql.ROW_COLUMNS`)."""

JsonObject = dict[str, Any]


def _v0_to_v1(data: JsonObject) -> JsonObject:
    """Format 0 is the unstamped JSON of the first durable builds: the same shape as 1."""
    return data


def _v1_to_v2(data: JsonObject) -> JsonObject:
    """Format 2 only adds requests stored by reference; a format-1 row is a full event."""
    return data


def _v2_to_v3(data: JsonObject) -> JsonObject:
    """A format-2 event (envelope included, defaults written out) is a valid format-3 event
    with its envelope put back: nothing to change."""
    return data


def _v3_to_v4(data: JsonObject) -> JsonObject:
    """Format 4 only adds requests that quote a system prompt and tools from an earlier
    request (`system_at`, `tools_at`), which a format-3 reader would misread: a format-3
    event is a format-4 event."""
    return data


def _v4_to_v5(data: JsonObject) -> JsonObject:
    """Format 5 only adds rows holding a run of deltas, which a format-4 reader would
    misread (they are unfolded before any upgrade, `runs.py`): a format-4 event is a
    format-5 event."""
    return data


UPGRADES: dict[int, Callable[[JsonObject], JsonObject]] = {
    0: _v0_to_v1,
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}
"""`UPGRADES[n]` turns format-n JSON into format n + 1; a new format adds one entry."""


def format_too_new(what: str, found: int) -> StoreError:
    return StoreError(
        "format_too_new",
        f"{what} was written by a newer steerable-bridge (record format {found}; this build"
        f" reads up to {FORMAT}); upgrade steerable-bridge to open it — nothing was changed",
    )


def check_readable(what: str, found: int | None) -> int:
    """The row's format (0 when unstamped); raises `format_too_new` past this build's."""
    version = 0 if found is None else found
    if version > FORMAT:
        raise format_too_new(what, version)
    return version


def _upgrade(data: JsonObject, found: int) -> JsonObject:
    for version in range(found, FORMAT):
        data = UPGRADES[version](data)
    return data


def corrupt(what: str, problem: str) -> StoreError:
    return StoreError(
        "corrupt_record",
        f"{what} cannot be read ({problem}); run `steerable-bridge sessions check` to see"
        " what is damaged and `steerable-bridge sessions export ID` to salvage the rest",
    )


# -- bodies: what a format-3 row keeps ------------------------------------------------------

_ENVELOPE = ("session_id", "run_id", "seq", "ts", "kind")


_DEFAULTED: dict[type, tuple[tuple[str, object], ...]] = {}


def _defaulted(cls: type) -> tuple[tuple[str, object], ...]:
    """`cls`'s fields that have a default, with it; tags (`kind`, `type`: a one-value
    Literal) are never left out, since they say which variant a nested value is."""
    known = _DEFAULTED.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    found: list[tuple[str, object]] = []
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if typing.get_origin(hint) is Literal and len(typing.get_args(hint)) == 1:
            continue
        if field.default is not dataclasses.MISSING:
            found.append((field.name, field.default))
        elif field.default_factory is not dataclasses.MISSING:
            found.append((field.name, field.default_factory()))
    _DEFAULTED[cls] = tuple(found)
    return _DEFAULTED[cls]


_FIELDS: dict[type, tuple[str, ...]] = {}

_LEAVES = (str, int, float, bool, type(None))
"""Values that hold no dataclass (most fields): `_omitted` passes them at once."""


def _field_names(cls: type) -> tuple[str, ...]:
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = tuple(field.name for field in dataclasses.fields(cls))
    return known


def _omitted(value: object, spec: dict[Any, Any]) -> dict[Any, Any]:
    """Add to `spec` (a pydantic `exclude`) every field of the dataclass `value`, at any
    depth, that equals its default."""
    cls = type(value)
    for name, default in _defaulted(cls):
        if getattr(value, name) == default:
            spec[name] = True
    for name in _field_names(cls):
        if name in spec:
            continue
        item = getattr(value, name)
        if isinstance(item, _LEAVES):
            continue
        if dataclasses.is_dataclass(item):
            inner = _omitted(item, {})
            if inner:
                spec[name] = inner
        elif isinstance(item, tuple) and item and dataclasses.is_dataclass(item[0]):
            parts = {i: _omitted(part, {}) for i, part in enumerate(item)}
            parts = {i: inner for i, inner in parts.items() if inner}
            if parts:
                spec[name] = parts
    return spec


def encode_body(event: LoopEvent) -> str:
    """The format-3 data of `event`: its JSON without the envelope and without fields equal
    to their default (`with_envelope` and the decoder put both back)."""
    spec = _omitted(event, dict.fromkeys(_ENVELOPE, True))
    return event_to_json(event, exclude=spec)


@lru_cache(maxsize=4096)
def _quoted(text: str) -> str:
    return json.dumps(text)


def with_envelope(session_json: str, row: Row) -> str:
    """A format-3 row's event JSON: its body with the envelope from the row's columns.
    `session_json` is the session id as a JSON string."""
    seq, _, kind, run_id, ts, data = row
    body = data if isinstance(data, str) else data.decode()
    if body[:1] != "{":
        raise ValueError("the stored body is not a JSON object")
    head = (
        f'{{"session_id":{session_json},"run_id":{_quoted(run_id)},"seq":{seq:d},'
        f'"ts":{ts:d},"kind":{_quoted(kind)}'
    )
    return head + "}" if body == "{}" else head + "," + body[1:]


def with_envelopes(session_json: str, rows: Iterable[Row]) -> list[str]:
    """`with_envelope` of each row (a bulk read, `decoding.py`), quoting each distinct
    kind and run id once. A seq or ts column that is not an integer makes text that does
    not decode to the row's event, which the caller must check."""
    quoted: dict[str, str] = {}
    texts: list[str] = []
    add = texts.append
    for seq, _, kind, run_id, ts, data in rows:
        body = data if isinstance(data, str) else data.decode()
        if body[:1] != "{":
            raise ValueError("the stored body is not a JSON object")
        run = quoted.get(run_id) or quoted.setdefault(run_id, json.dumps(run_id))
        name = quoted.get(kind) or quoted.setdefault(kind, json.dumps(kind))
        if body != "{}":
            add(
                f'{{"session_id":{session_json},"run_id":{run},"seq":{seq},"ts":{ts},"kind":{name},{body[1:]}'
            )
        else:
            add(
                f'{{"session_id":{session_json},"run_id":{run},"seq":{seq},"ts":{ts},"kind":{name}}}'
            )
    return texts


_RUN_MARK = '{"run":'
_RUN_MARK_BYTES = _RUN_MARK.encode()


def is_run(found: int | None, data: str | bytes) -> bool:
    """Whether a row (its format and data column) holds a run of deltas (`runs.py`): its
    body starts with the `run` key, which no event's body starts with."""
    if found is None or found < RUN_FORMAT:
        return False
    return data.startswith(_RUN_MARK) if isinstance(data, str) else data.startswith(_RUN_MARK_BYTES)


def is_reference(row: Row) -> bool:
    """Whether a row holds a model request stored by reference (formats 2 and 3)."""
    if row[2] != "model_request":
        return False
    data, key = row[5], REF_KEYS.get(row[1] or 0)
    if key is None:
        return False
    marker = f'"{key}":'
    return marker in data if isinstance(data, str) else marker.encode() in data


def history_compaction(session_id: str, rows: Iterable[Row]) -> Compaction | None:
    """The first `history` compaction among rows read newest first (tool-result folds do
    not move where a resume starts)."""
    for row in rows:
        event = decode_event(session_id, row)
        if isinstance(event, Compaction) and event.scope == "history":
            return event
    return None


def decode_event(session_id: str, row: Row) -> LoopEvent:
    """The event stored in one row, upgraded to this build's format; raises StoreError."""
    seq, found = row[0], row[1]
    try:
        if found == FORMAT and not is_reference(row) and not is_run(found, row[5]):
            event = event_from_json(with_envelope(_quoted(session_id), row))
            if event.seq == seq and event.session_id == session_id:
                return event
            raise ValueError(f"its JSON says session {event.session_id} seq {event.seq}")
    except (ValidationError, ValueError, UnicodeDecodeError) as err:
        raise corrupt(f"event seq {seq} of session {session_id}", short(err)) from None
    what = f"event seq {seq} of session {session_id}"
    version = check_readable(what, found)
    if is_reference(row):
        raise corrupt(what, "it is a request stored by reference; read it with its session")
    if is_run(version, row[5]):
        raise corrupt(what, "it is a run of deltas; read it with its session")
    try:
        if version >= BODY_FORMAT:
            event = event_from_jsonable(upgraded(with_envelope(_quoted(session_id), row), version))
        else:
            event = event_from_jsonable(upgraded(row[5], version))
    except (ValidationError, ValueError, UnicodeDecodeError) as err:
        raise corrupt(what, short(err)) from None
    if event.seq != seq or event.session_id != session_id:
        raise corrupt(what, f"its JSON says session {event.session_id} seq {event.seq}")
    return event


def upgraded(data: str | bytes | JsonObject, version: int) -> JsonObject:
    """Format-`version` event JSON (envelope included) upgraded to this build's format."""
    loaded = json.loads(data) if isinstance(data, str | bytes) else data
    if not isinstance(loaded, dict):
        raise ValueError("not a JSON object")
    return _upgrade(loaded, version)


# -- session records ------------------------------------------------------------------------


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
            "user": record.user,
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
            user=_opt_str(fields.get("user")),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise corrupt(what, short(err)) from None
    if record.session_id != session_id:
        raise corrupt(what, f"its JSON names session {record.session_id}")
    return record


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def short(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 200 else text[:197] + "..."
