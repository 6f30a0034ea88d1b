"""What a bridged turn knows of its AG-UI runs: each tool call so far, and how a run ended.

`BridgedCall` is one tool call as far as the server has told it (name, argument pieces, the
`tool_call_end` logged for it, whether it started and finished); `Ending` is how one AG-UI
run ended (an outcome — success with the calls left to the client, interrupt with its
interrupts, cancelled — or a failure with the server's code and message). `ids_in` gives
the ids a conversation already uses (so a server's reused ids can be told apart) and
`raw_arguments` a call's arguments as an object. Our own server's events carry what the
native ones lack under `metadata.steerable`; `described(kind, event, ...)` reads that back
as the LoopEvent it describes, or None for a server that is not ours. Plain values and
pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import BaseEvent, Interrupt
from pydantic import ValidationError

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent

__all__ = [
    "LEGACY_INTERRUPT",
    "BridgedCall",
    "Ending",
    "described",
    "ids_in",
    "legacy_interrupt",
    "raw_arguments",
]

META_KEY = "steerable"


@dataclass(slots=True)
class BridgedCall:
    """A tool call of the turn, as far as the server has told it."""

    call_id: str
    name: str
    args: list[str] = field(default_factory=list)
    ended: ev.ToolCallEnd | None = None
    started: bool = False
    finished: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """How one AG-UI run ended: finished (with an outcome) or failed."""

    failed: bool = False
    code: str = ""
    message: str = ""
    outcome: Literal["success", "interrupt", "cancelled"] = "success"
    interrupts: tuple[Interrupt, ...] = ()
    pending: tuple[str, ...] = ()
    """Calls the server left for its client (`pendingToolCallIds`), as the turn names them."""
    legacy: bool = False
    """The interrupts came as CUSTOM `on_interrupt` (ag-ui-langgraph before AG-UI 1.0
    outcomes): they are answered in `forwardedProps.command.resume`, not `resume[]`."""


LEGACY_INTERRUPT = "on_interrupt"
"""The CUSTOM event ag-ui-langgraph sends for a LangGraph `interrupt()` (its value: the
interrupt's value, a string or JSON text), before a RUN_FINISHED without an outcome."""

_QUESTION_KEYS = ("message", "question", "prompt", "text", "description")


def legacy_interrupt(number: int, value: Any) -> Interrupt:
    """An `on_interrupt` CUSTOM event's value as an AG-UI interrupt to put to the person."""
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
    if isinstance(parsed, Mapping):
        text = next((parsed[k] for k in _QUESTION_KEYS if isinstance(parsed.get(k), str)), None)
        message = text or json.dumps(parsed)[:500]
    else:
        message = (parsed if isinstance(parsed, str) else json.dumps(parsed))[:500]
    return Interrupt(id=f"{LEGACY_INTERRUPT}-{number}", reason=LEGACY_INTERRUPT, message=message)


def ids_in(events: Iterable[LoopEvent]) -> set[str]:
    """Every message and tool call id the events use (taken before the turn)."""
    taken: set[str] = set()
    for event in events:
        if type(event) is ev.TextDelta or type(event) is ev.ReasoningDelta:
            taken.add(event.message_id)  # most of a log (one per token), and no call id
            continue
        message_id = getattr(event, "message_id", None)
        if isinstance(message_id, str):
            taken.add(message_id)
        call_id = getattr(event, "call_id", None)
        if isinstance(call_id, str):
            taken.add(call_id)
    return taken


def described(kind: str, event: BaseEvent, **fields: Any) -> Any:
    """The LoopEvent `kind` our server's `event` describes in its metadata, with `fields`
    added, or None when the event is not one of ours (or does not validate)."""
    metadata = event.metadata
    extra = metadata.get(META_KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(extra, Mapping) or extra.get("kind") != kind:
        return None
    data = {
        **{k: v for k, v in extra.items() if k not in ("seq", "run_id")},
        **fields,
        "session_id": "",
        "run_id": "",
        "seq": 0,
        "ts": 0,
    }
    try:
        return codec.event_from_jsonable(data)
    except (ValidationError, ValueError, TypeError):
        return None


def raw_arguments(call: BridgedCall) -> dict[str, Any]:
    """A call's arguments as an object (empty when they are not one)."""
    try:
        value = json.loads(call.ended.arguments_json if call.ended else "".join(call.args))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
