"""JSON encoding of LoopEvents: exact round trip and the published JSON Schema.

One pydantic `TypeAdapter` over the `LoopEvent` union (discriminated on `kind`) does both
directions, so the schema that `steerable-bridge schema` prints is the one the decoder
enforces. Stores, the `_steerable/event` ACP channel, AG-UI CUSTOM events and `run --jsonl`
all go through here; nothing else in the package hand-writes event JSON. `unencodable` and
`repaired` are the last line against text UTF-8 cannot encode (see `log.py`). The adapters
are built once, on first use (about 50 ms of pydantic schema building that a process which
has not yet touched an event — `acp` answering `initialize` — should not wait for).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from pydantic import Field, TypeAdapter
from pydantic_core import PydanticSerializationError, SchemaSerializer

from steerable_bridge.runtime.encoding.surrogates import scrub_json
from steerable_bridge.runtime.events import LoopEvent

__all__ = [
    "event_from_json",
    "event_from_jsonable",
    "event_to_json",
    "event_to_jsonable",
    "events_from_json",
    "repaired",
    "schema",
    "unencodable",
]


@cache
def _adapter() -> TypeAdapter[LoopEvent]:
    return TypeAdapter(Annotated[LoopEvent, Field(discriminator="kind")])


@cache
def _list_adapter() -> TypeAdapter[list[LoopEvent]]:
    return TypeAdapter(list[Annotated[LoopEvent, Field(discriminator="kind")]])


@cache
def _serializer() -> SchemaSerializer:
    """pydantic-core's serializer itself: with the options `dump_json` would pass, a third
    less time per event than going through `TypeAdapter.dump_json` (stores encode every
    event)."""
    return _adapter().serializer


def event_to_json(event: LoopEvent, *, exclude: dict[Any, Any] | None = None) -> str:
    """Compact JSON text of one event; `exclude` (pydantic's nested form) leaves fields out
    (a store's body without the fields it keeps elsewhere, see `adapters/storage/formats.py`)."""
    return _serializer().to_json(event, exclude=exclude).decode()


def event_from_json(text: str | bytes) -> LoopEvent:
    """Parse and validate one event; raises `pydantic.ValidationError` naming the field."""
    return _adapter().validate_json(text)


def events_from_json(text: str | bytes) -> list[LoopEvent]:
    """Parse and validate a JSON array of events in one call (a stored log read back whole
    decodes this way: one pass of pydantic's parser instead of one call per event)."""
    return _list_adapter().validate_json(text)


def event_to_jsonable(event: LoopEvent) -> dict[str, Any]:
    """The event as plain JSON-compatible Python data (for embedding in other messages)."""
    data: dict[str, Any] = _adapter().dump_python(event, mode="json")
    return data


def event_from_jsonable(data: object) -> LoopEvent:
    """Inverse of `event_to_jsonable`."""
    return _adapter().validate_python(data)


def unencodable(event: LoopEvent) -> bool:
    """Whether `event` fails to encode (a string holding a lone UTF-16 surrogate)."""
    try:
        _serializer().to_json(event)
    except (PydanticSerializationError, UnicodeError):
        return True
    return False


def repaired(event: LoopEvent) -> LoopEvent:
    """`event` with every string made encodable (lone surrogates U+FFFD, `surrogates.py`).
    For the last line of defence only (`log.py`, the wire encoders): text is repaired where
    it enters, so this walks the whole event and is not meant for the hot path."""
    adapter = _adapter()
    return adapter.validate_python(scrub_json(adapter.dump_python(event, mode="json")))


def schema() -> dict[str, Any]:
    """The JSON Schema of the whole taxonomy."""
    result: dict[str, Any] = _adapter().json_schema()
    result["title"] = "LoopEvent"
    return result
