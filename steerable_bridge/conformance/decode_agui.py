"""AG-UI events → LoopEvents: the inverse of the (lossless) AG-UI rendering.

`decode_agui(events)` reads AG-UI events as received (JSON objects or SDK models) and
rebuilds the exact LoopEvents they carry (`AguiDecoder` does it one event at a time). A
native carrier (the first type of a row of `transports/agui/mapping.py`, which names its
wire fields, dotted when nested) gives its native fields under the taxonomy's names,
overlaid with `metadata.steerable` (kind, seq, run id and whatever the native event lacks),
plus `session_id` = the run's `threadId` and `ts` = `timestamp`; a CUSTOM `steerable.<kind>`
carries the whole event as its value — but for a `model_request` after the thread's first,
which carries what changed since the previous one (`agui_requests.py` rebuilds it; the
stream must then hold that previous one: decode a thread from its first run, or a stream
whose runs asked for `full_requests`). Events marked `metadata.steerable.derived`
(MESSAGES_SNAPSHOT, the second half of the reasoning pairs, the server's own short streams)
carry no LoopEvent and are skipped. AG-UI streams start with RUN_STARTED, so session-level
events that happened between runs travel inside the next run; the result is put back in log
order by `seq`. Raises `DecodeError` naming the event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from steerable_bridge.conformance.agui_requests import REQUEST, is_by_reference, rebuild
from steerable_bridge.conformance.agui_rules import event_as_json
from steerable_bridge.conformance.decode_acp import DecodeError
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import canonical_json
from steerable_bridge.transports.agui.mapping import by_carrier

__all__ = ["AguiDecoder", "decode_agui", "decode_event"]


_ABSENT = object()


def _wire_field(raw: dict[str, Any], path: str) -> Any:
    """The value at `path` (dotted: nested objects) of an event, or `_ABSENT`."""
    value: Any = raw
    for name in path.split("."):
        if not isinstance(value, dict) or name not in value:
            return _ABSENT
        value = value[name]
    return value


class AguiDecoder:
    """Decodes AG-UI events one at a time, keeping each thread's last model request (what
    the next one refers to)."""

    def __init__(self) -> None:
        self._requests: dict[str | None, dict[str, Any]] = {}

    def decode(self, event: object, thread_id: str | None) -> LoopEvent | None:
        """The LoopEvent one AG-UI event of thread `thread_id` carries (None when derived);
        raises `DecodeError`."""
        raw = event_as_json(event)
        try:
            return self._one(raw, thread_id)
        except (ValidationError, KeyError, TypeError, AttributeError, ValueError) as err:
            raise DecodeError(f"{raw.get('type')}: {err}") from err

    def _one(self, raw: dict[str, Any], thread_id: str | None) -> LoopEvent | None:
        if raw.get("type") == "CUSTOM" and raw.get("name") == REQUEST:
            value = raw.get("value")
            if is_by_reference(value):
                assert isinstance(value, dict)
                value = rebuild(value, self._requests.get(thread_id))
            event = codec.event_from_jsonable(value)
            assert isinstance(value, dict)
            self._requests[thread_id] = value
            return event
        return _decode_one(raw, thread_id)


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
    """The LoopEvent one AG-UI event of thread `thread_id` carries (None when derived), on
    its own: a model request sent by reference needs the stream before it (`AguiDecoder`)."""
    return AguiDecoder().decode(event, thread_id)


def decode_agui(events: Sequence[object]) -> list[LoopEvent]:
    """The LoopEvents an AG-UI stream (one or more runs) carries, in log order."""
    out: list[LoopEvent] = []
    thread_id: str | None = None
    decoder = AguiDecoder()
    for index, event in enumerate(events):
        raw = event_as_json(event)
        if raw.get("type") == "RUN_STARTED":
            thread_id = raw.get("threadId")
        try:
            decoded = decoder.decode(raw, thread_id)
        except DecodeError as err:
            raise DecodeError(f"event {index} ({raw.get('type')}): {err}") from err
        if decoded is not None:
            out.append(decoded)
    out.sort(key=lambda e: e.seq)
    return out
