"""Record format versions of stored events and session records, and their in-memory upgrades.

Every row a durable store writes carries `FORMAT`, the version of the JSON in its data
column. Reading goes through `decode_event` / `decode_record`: a row stamped with this
build's version decodes directly; a row without a stamp (written before stamps existed,
format 0) or with an older one is upgraded step by step in memory — the stored row is never
rewritten, the log stays append-only; a row from a newer build is refused with
`format_too_new`, naming the remedy (upgrade steerable-bridge). A row that does not decode is
an error naming its seq (`corrupt_record`), never skipped. Used by `sqlite.py` and the
`sessions` command; it must never write anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from steerable_bridge.runtime.codec import event_from_json, event_from_jsonable
from steerable_bridge.runtime.events import Compaction, LoopEvent
from steerable_bridge.runtime.storage import SessionRecord, StoreError

__all__ = [
    "FORMAT",
    "UPGRADES",
    "decode_event",
    "decode_record",
    "encode_record",
    "format_too_new",
]

FORMAT = 1
"""The record format this build writes and the newest it reads."""

JsonObject = dict[str, Any]


def _v0_to_v1(data: JsonObject) -> JsonObject:
    """Format 0 is the unstamped JSON of the first durable builds: the same shape as 1."""
    return data


UPGRADES: dict[int, Callable[[JsonObject], JsonObject]] = {0: _v0_to_v1}
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


def decode_event(session_id: str, seq: int, found: int | None, data: str | bytes) -> LoopEvent:
    """The event stored in one row, upgraded to this build's format; raises StoreError."""
    what = f"event seq {seq} of session {session_id}"
    version = 0 if found is None else found
    if version > FORMAT:
        raise format_too_new(what, version)
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
