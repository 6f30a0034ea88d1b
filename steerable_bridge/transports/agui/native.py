"""The native AG-UI form of a run's content: steps, text, reasoning, tool calls, state.

One pure function per LoopEvent kind between a run's start and end (`step_started` ...
`state_delta`), each returning the AG-UI events (SDK models) that carry it, with the
LoopEvent fields the native event lacks under `metadata["steerable"]` (`meta`); plus the
CUSTOM form every kind can take (`custom`). The table in `mapping.py` names which function
renders which kind; the run's bracket and the thread's plan live in `renderer.py`. A
function that raises `ValueError` (an SDK model rejecting the value) makes the renderer fall
back to CUSTOM. `interrupt` is the wire form of one of RUN_FINISHED's interrupts (also
served by `GET /threads/{id}`): a url question's page rides in `metadata: {"mode": "url",
"url": ...}`. No I/O, no clock, no ids.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime import values
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import TextPart, canonical_json

__all__ = [
    "DERIVED",
    "META_KEY",
    "custom",
    "fields_of",
    "meta",
    "reasoning_delta",
    "reasoning_end",
    "reasoning_start",
    "result_message_id",
    "state_delta",
    "state_snapshot",
    "step_finished",
    "step_started",
    "text_delta",
    "text_end",
    "text_start",
    "tool_call_delta",
    "tool_call_end",
    "tool_call_start",
    "tool_finished",
]

META_KEY = "steerable"
"""The key under `metadata` that holds the LoopEvent fields a native event lacks."""

DERIVED: dict[str, Any] = {META_KEY: {"derived": True}}
"""`metadata` of an AG-UI event that carries no LoopEvent (a decoder skips it)."""


def interrupt(item: values.Interrupt, extra: dict[str, Any] | None = None) -> Interrupt:
    """The AG-UI interrupt for one the run stopped on (a url question's page in metadata,
    with `extra` — a snapshot's permission options — added beside it)."""
    metadata: dict[str, Any] = {"mode": "url", "url": item.url} if item.url is not None else {}
    if extra:
        metadata.update(extra)
    return Interrupt(
        id=item.id,
        reason=item.reason,
        tool_call_id=item.tool_call_id,
        response_schema=(
            json.loads(item.response_schema_json) if item.response_schema_json is not None else None
        ),
        metadata=metadata or None,
    )


def result_message_id(call_id: str) -> str:
    """The AG-UI message id of a tool call's result (TOOL_CALL_RESULT and snapshots)."""
    return f"result-{call_id}"


def meta(event: LoopEvent, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """`metadata` carrying `event`'s kind, seq and run id, plus `extra`."""
    fields: dict[str, Any] = {"kind": event.kind, "seq": event.seq, "run_id": event.run_id}
    if extra:
        fields.update(extra)
    return {META_KEY: fields}


def fields_of(event: LoopEvent, *names: str) -> dict[str, Any]:
    """The named fields of `event` in codec JSON form, leaving out nulls."""
    data = codec.event_to_jsonable(event)
    return {name: data[name] for name in names if data.get(name) is not None}


def text_of(event: ev.ToolFinished) -> str:
    """A tool result as the text TOOL_CALL_RESULT carries (an error's code when no text)."""
    text = "".join(p.text for p in event.content if isinstance(p, TextPart))
    if not text and event.error is not None:
        return f"error [{event.error.code}]: {event.error.message}"
    return text


def custom(event: LoopEvent) -> CustomEvent:
    """The CUSTOM form every kind can take: the whole event as its value."""
    return CustomEvent(
        name=f"steerable.{event.kind}",
        value=codec.event_to_jsonable(event),
        timestamp=event.ts,
    )


def step_started(event: ev.StepStarted) -> list[BaseEvent]:
    return [
        StepStartedEvent(
            step_name=f"step-{event.step}",
            timestamp=event.ts,
            metadata=meta(event, {"step": event.step}),
        )
    ]


def step_finished(event: ev.StepFinished) -> list[BaseEvent]:
    return [
        StepFinishedEvent(
            step_name=f"step-{event.step}",
            timestamp=event.ts,
            metadata=meta(event, fields_of(event, "step", "finish_reason", "usage")),
        )
    ]


# -- text and reasoning --------------------------------------------------------------------


def text_start(event: ev.TextStart) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(
            message_id=event.message_id,
            role="assistant",
            timestamp=event.ts,
            metadata=meta(event),
        )
    ]


def text_delta(event: ev.TextDelta) -> list[BaseEvent]:
    if not event.delta:
        return [custom(event)]
    return [
        TextMessageContentEvent(
            message_id=event.message_id,
            delta=event.delta,
            timestamp=event.ts,
            metadata=meta(event),
        )
    ]


def text_end(event: ev.TextEnd) -> list[BaseEvent]:
    return [
        TextMessageEndEvent(message_id=event.message_id, timestamp=event.ts, metadata=meta(event))
    ]


def reasoning_start(event: ev.ReasoningStart) -> list[BaseEvent]:
    return [
        ReasoningStartEvent(message_id=event.message_id, timestamp=event.ts, metadata=meta(event)),
        ReasoningMessageStartEvent(
            message_id=event.message_id, timestamp=event.ts, metadata=DERIVED
        ),
    ]


def reasoning_delta(event: ev.ReasoningDelta) -> list[BaseEvent]:
    if not event.delta:
        return [custom(event)]
    return [
        ReasoningMessageContentEvent(
            message_id=event.message_id,
            delta=event.delta,
            timestamp=event.ts,
            metadata=meta(event),
        )
    ]


def reasoning_end(event: ev.ReasoningEnd) -> list[BaseEvent]:
    return [
        ReasoningMessageEndEvent(
            message_id=event.message_id,
            timestamp=event.ts,
            metadata=meta(event, fields_of(event, "signature", "redacted_data")),
        ),
        ReasoningEndEvent(message_id=event.message_id, timestamp=event.ts, metadata=DERIVED),
    ]


# -- tool calls ----------------------------------------------------------------------------


def tool_call_start(event: ev.ToolCallStart) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(
            tool_call_id=event.call_id,
            tool_call_name=event.name,
            parent_message_id=event.parent_message_id,
            timestamp=event.ts,
            metadata=meta(event),
        )
    ]


def tool_call_delta(event: ev.ToolCallDelta) -> list[BaseEvent]:
    if not event.delta:
        return [custom(event)]
    return [
        ToolCallArgsEvent(
            tool_call_id=event.call_id,
            delta=event.delta,
            timestamp=event.ts,
            metadata=meta(event),
        )
    ]


def tool_call_end(event: ev.ToolCallEnd) -> list[BaseEvent]:
    extra = fields_of(
        event, "name", "arguments_json", "tool_kind", "title", "locations", "executor"
    )
    return [
        ToolCallEndEvent(
            tool_call_id=event.call_id, timestamp=event.ts, metadata=meta(event, extra)
        )
    ]


def tool_finished(event: ev.ToolFinished) -> list[BaseEvent]:
    extra = fields_of(event, "status", "content", "raw_output_json", "error")
    return [
        ToolCallResultEvent(
            message_id=result_message_id(event.call_id),
            tool_call_id=event.call_id,
            content=text_of(event),
            role="tool",
            timestamp=event.ts,
            metadata=meta(event, extra),
        )
    ]


# -- state and plan ------------------------------------------------------------------------


def state_snapshot(event: ev.StateSnapshot) -> list[BaseEvent]:
    state = StateSnapshotEvent(
        snapshot=json.loads(event.state_json), timestamp=event.ts, metadata=meta(event)
    )
    wire = state.model_dump(mode="json", by_alias=True)["snapshot"]  # NaN goes out as null
    if canonical_json(wire) != event.state_json:
        assert state.metadata is not None
        state.metadata[META_KEY]["state_json"] = event.state_json
    return [state]


def state_delta(event: ev.StateDelta) -> list[BaseEvent]:
    delta = StateDeltaEvent(
        delta=json.loads(event.patch_json), timestamp=event.ts, metadata=meta(event)
    )
    wire = delta.model_dump(mode="json", by_alias=True)["delta"]
    if canonical_json(wire) != event.patch_json:
        assert delta.metadata is not None
        delta.metadata[META_KEY]["patch_json"] = event.patch_json
    return [delta]
