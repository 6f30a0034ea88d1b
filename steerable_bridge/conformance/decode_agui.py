"""AG-UI events → LoopEvents: the inverse of the (lossless) AG-UI rendering.

`decode_agui(events)` reads AG-UI events as received (JSON objects or SDK models) and
rebuilds the exact LoopEvents they carry. A native carrier (the first type of a row of
`transports/agui/mapping.py`, which names its wire fields, dotted when nested) gives its
native fields under the taxonomy's names, overlaid with `metadata.steerable` (kind, seq,
run id and whatever the native event lacks), plus `session_id` = the run's `threadId` and
`ts` = `timestamp`; a CUSTOM `steerable.<kind>` carries the whole event as its value. Events
marked `metadata.steerable.derived` (MESSAGES_SNAPSHOT, the second half of the reasoning
pairs, the server's own short streams) carry no LoopEvent and are skipped. AG-UI streams
start with RUN_STARTED, so session-level events that happened between runs travel inside
the next run; the result is put back in log order by `seq`. Raises `DecodeError` naming the
event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from steerable_bridge.conformance.agui_rules import event_as_json
from steerable_bridge.conformance.decode_acp import DecodeError
from steerable_bridge.runtime import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import canonical_json
from steerable_bridge.transports.agui.mapping import by_carrier

__all__ = ["decode_agui", "decode_event"]


_ABSENT = object()


def _wire_field(raw: dict[str, Any], path: str) -> Any:
    """The value at `path` (dotted: nested objects) of an event, or `_ABSENT`."""
    value: Any = raw
    for name in path.split("."):
        if not isinstance(value, dict) or name not in value:
            return _ABSENT
        value = value[name]
    return value


def _decode_one(raw: dict[str, Any], thread_id: str | None) -> LoopEvent | None:
    kind = raw.get("type")
    metadata = raw.get("metadata") or {}
    extra = metadata.get("steerable") if isinstance(metadata, dict) else None
    if isinstance(extra, dict) and extra.get("derived"):
        return None
    if kind == "CUSTOM":
        name = str(raw.get("name", ""))
        if not name.startswith("steerable."):
            return None
        return codec.event_from_jsonable(raw.get("value"))
    found = by_carrier(kind) if isinstance(kind, str) else None
    if found is None or not isinstance(extra, dict):
        raise DecodeError(
            f"{kind} has no metadata.steerable; it was not rendered by steerable-bridge's"
            " AG-UI renderer"
        )
    data: dict[str, Any] = {}
    for wire, field in found.fields.items():
        if (value := _wire_field(raw, wire)) is not _ABSENT:
            data[field] = value
    for wire, field in found.canonical.items():
        data[field] = canonical_json(raw[wire])
    data.update(extra)
    data["session_id"] = thread_id
    data["ts"] = raw.get("timestamp")
    return codec.event_from_jsonable(data)


def decode_event(event: object, thread_id: str) -> LoopEvent | None:
    """The LoopEvent one AG-UI event of thread `thread_id` carries (None when derived)."""
    raw = event_as_json(event)
    try:
        return _decode_one(raw, thread_id)
    except (ValidationError, KeyError, TypeError, AttributeError) as err:
        raise DecodeError(f"{raw.get('type')}: {err}") from err


def decode_agui(events: Sequence[object]) -> list[LoopEvent]:
    """The LoopEvents an AG-UI stream (one or more runs) carries, in log order."""
    out: list[LoopEvent] = []
    thread_id: str | None = None
    for index, event in enumerate(events):
        raw = event_as_json(event)
        if raw.get("type") == "RUN_STARTED":
            thread_id = raw.get("threadId")
        try:
            decoded = _decode_one(raw, thread_id)
        except (DecodeError, ValidationError, KeyError, TypeError, AttributeError) as err:
            raise DecodeError(f"event {index} ({raw.get('type')}): {err}") from err
        if decoded is not None:
            out.append(decoded)
    out.sort(key=lambda e: e.seq)
    return out
