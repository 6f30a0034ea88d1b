"""The AG-UI mapping table: which AG-UI events carry each LoopEvent kind, as data.

One `AguiRow` per kind with a native AG-UI form: its AG-UI event types (carrier first; the
rest are derived), the carrier's native wire fields and the LoopEvent fields they hold, the
function of `native.py` that builds it (None: the renderer's own bracket — run start and
end, the thread's plan) and a note for `docs/mapping.md`. Every other kind travels as CUSTOM
`steerable.<kind>` with the whole event as its value (`CUSTOM_NOTES` adds what the docs say
about some of them; a `model_request` after the thread's first carries what changed since
the previous one, `requests.py`). The renderer's handlers, the byte fast path's CUSTOM kinds, the
conformance decoder and the conformance table all read this table, so adding a native event
means one row here and one test. Every carrier but CUSTOM has `metadata.steerable` =
`{kind, seq, run_id, ...}` with what the native event lacks (see `native.meta`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import BaseEvent

from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.agui import native

__all__ = ["CUSTOM_NOTES", "NATIVE", "TABLE", "AguiRow", "by_carrier", "by_kind"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AguiRow:
    """One kind's native AG-UI form."""

    event: type[ev.EventBase]
    types: tuple[str, ...]
    """AG-UI event types, the carrier first (the others are derived: they carry nothing)."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """The carrier's wire field → the LoopEvent field it holds (a dotted wire field names one
    inside an object: `content.entries`)."""
    canonical: Mapping[str, str] = field(default_factory=dict)
    """The carrier's wire field → the LoopEvent field holding its canonical JSON text."""
    render: Callable[[Any], list[BaseEvent]] | None = None
    """The `native.py` function that builds the events; None: the renderer's own."""
    note: str = ""

    @property
    def kind(self) -> str:
        return str(self.event.__dataclass_fields__["kind"].default)


_MSG = {"messageId": "message_id"}
_DELTA = {"messageId": "message_id", "delta": "delta"}

TABLE: tuple[AguiRow, ...] = (
    AguiRow(event=ev.RunStarted, types=("RUN_STARTED",),
            note="threadId = session, runId, protocolVersion; model, parent_run_id and"
            " trace_id in metadata"),
    AguiRow(event=ev.RunFinished, types=("RUN_FINISHED",),
            note="after the derived MESSAGES_SNAPSHOT; outcome success (pendingToolCallIds) /"
            " interrupt / cancelled (also for rejected; for a 0.0.x client: success without"
            " pendingToolCallIds, no outcome when cancelled), usage; stop_reason, usage,"
            " pending_tool_call_ids, interrupts in metadata"),
    AguiRow(event=ev.RunFailed, types=("RUN_ERROR",), fields={"code": "code", "message": "message"},
            note="after the derived MESSAGES_SNAPSHOT; code, message; never followed by"
            " RUN_FINISHED"),
    AguiRow(event=ev.StepStarted, types=("STEP_STARTED",), render=native.step_started,
            note="stepName step-N; step in metadata"),
    AguiRow(event=ev.StepFinished, types=("STEP_FINISHED",), render=native.step_finished,
            note="stepName step-N; step, finish_reason, usage in metadata"),
    AguiRow(event=ev.TextStart, types=("TEXT_MESSAGE_START",), fields=_MSG,
            render=native.text_start, note="role assistant"),
    AguiRow(event=ev.TextDelta, types=("TEXT_MESSAGE_CONTENT",), fields=_DELTA,
            render=native.text_delta),
    AguiRow(event=ev.TextEnd, types=("TEXT_MESSAGE_END",), fields=_MSG, render=native.text_end),
    AguiRow(event=ev.ReasoningStart, types=("REASONING_START", "REASONING_MESSAGE_START"),
            fields=_MSG, render=native.reasoning_start, note="the second event is derived"),
    AguiRow(event=ev.ReasoningDelta, types=("REASONING_MESSAGE_CONTENT",), fields=_DELTA,
            render=native.reasoning_delta),
    AguiRow(event=ev.ReasoningEnd, types=("REASONING_MESSAGE_END", "REASONING_END"), fields=_MSG,
            render=native.reasoning_end,
            note="the second event is derived; signature, redacted_data in metadata"),
    AguiRow(event=ev.ToolCallStart, types=("TOOL_CALL_START",),
            fields={"toolCallId": "call_id", "toolCallName": "name",
                    "parentMessageId": "parent_message_id"},
            render=native.tool_call_start, note="parentMessageId"),
    AguiRow(event=ev.ToolCallDelta, types=("TOOL_CALL_ARGS",),
            fields={"toolCallId": "call_id", "delta": "delta"}, render=native.tool_call_delta,
            note="streamed as the model produces it"),
    AguiRow(event=ev.ToolCallEnd, types=("TOOL_CALL_END",), fields={"toolCallId": "call_id"},
            render=native.tool_call_end,
            note="name, arguments_json, tool_kind, title, locations, executor in metadata"),
    AguiRow(event=ev.ToolFinished, types=("TOOL_CALL_RESULT",), fields={"toolCallId": "call_id"},
            render=native.tool_finished,
            note="messageId result-<call_id>, content = its text; status, content,"
            " raw_output_json, error in metadata"),
    AguiRow(event=ev.StateSnapshot, types=("STATE_SNAPSHOT",),
            canonical={"snapshot": "state_json"}, render=native.state_snapshot,
            note="snapshot; state_json in metadata only when not canonical"),
    AguiRow(event=ev.StateDelta, types=("STATE_DELTA",), canonical={"delta": "patch_json"},
            render=native.state_delta,
            note="JSON Patch; patch_json in metadata only when not canonical"),
    AguiRow(event=ev.PlanUpdated, types=("ACTIVITY_SNAPSHOT",),
            fields={"content.entries": "entries"},
            note="activityType plan, messageId plan-<threadId>, replace"),
)  # fmt: skip

CUSTOM_NOTES: Mapping[str, str] = {
    "tool_started": "value.sandbox: bwrap / none / client for tools that run commands, else null",
    "question_asked": "in a run that waits for the answer, RUN_FINISHED outcome interrupt id"
    " question-<call_id>, reason = message, toolCallId, responseSchema {action,"
    " content: the requested schema} (url: {action} only, metadata {mode: url, url})",
    "question_answered": "the client answers the interrupt with resume[] {interruptId, status"
    " resolved, payload {action, content}} (status cancelled = cancel)",
    "notice": "live only: not in MESSAGES_SNAPSHOT",
    "model_request": "the thread's first request whole; each later one by reference to the"
    " previous (value.request holds the messages after the prefix it shares, system / tools"
    " only when changed; value.request_ref {base, prefix, messages, tokens, system, tools});"
    " whole with forwardedProps.steerable.full_requests: true",
}
"""Doc notes for kinds that travel as CUSTOM `steerable.<kind>`."""

NATIVE: frozenset[type[ev.EventBase]] = frozenset(row.event for row in TABLE)
"""Kinds with a native AG-UI form; every other kind is sent as CUSTOM."""

_BY_KIND: dict[str, AguiRow] = {row.kind: row for row in TABLE}
_BY_CARRIER: dict[str, AguiRow] = {row.types[0]: row for row in TABLE}


def by_kind(kind: str) -> AguiRow | None:
    """The row of a kind with a native form (None: it travels as CUSTOM)."""
    return _BY_KIND.get(kind)


def by_carrier(event_type: str) -> AguiRow | None:
    """The row whose carrier is AG-UI event type `event_type` (None: not a carrier)."""
    return _BY_CARRIER.get(event_type)
