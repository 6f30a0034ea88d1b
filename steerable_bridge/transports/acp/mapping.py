"""The ACP mapping table: which ACP message carries each LoopEvent kind, as data.

One `AcpRow` per kind of the taxonomy: the form it takes (a `session/update` variant, the
`session/prompt` request, response or error, a client request, a notification of its own,
or nothing but the opt-in `_steerable/event` channel), the JSON-RPC method, the
`sessionUpdate` variants the renderer may send for it, the `AcpRenderer` method that builds
them (by name: None renders nothing), whether a decoder of the editor-facing messages
rebuilds the event exactly (`exact`; else `meaning` names the fields it does rebuild), the
client capability it needs and a note for `docs/mapping.md`. The renderer's dispatch table
and the ACP column of `conformance/mapping.py` both read this table, so a kind's ACP form is
one row here; it never imports the renderer (the renderer imports it) nor the conformance
package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from steerable_bridge.runtime import events as ev

__all__ = ["EVENT_CHANNEL", "TABLE", "AcpForm", "AcpRow", "by_kind"]

AcpForm = Literal[
    "update",
    "prompt request",
    "prompt response",
    "JSON-RPC error",
    "client request",
    "notification",
    "event channel",
]

EVENT_CHANNEL = "_steerable/event"
"""The opt-in notification that carries every event whole (`capabilities.py`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcpRow:
    """One kind's ACP form."""

    event: type[ev.EventBase]
    form: AcpForm
    method: str
    """The JSON-RPC method whose message carries the kind."""
    updates: tuple[str, ...] = ()
    """The `sessionUpdate` variants the renderer may send for it (empty: none)."""
    render: str | None = None
    """The name of the `AcpRenderer` method that builds those updates; None: no update."""
    exact: bool
    """A decoder of the editor-facing messages (no event channel) rebuilds the event exactly."""
    meaning: tuple[str, ...] = ()
    """For kinds shown but not exact: the fields a decoder does rebuild."""
    capability: str = ""
    """The `clientCapabilities.session` key a client must advertise to see this kind."""
    note: str
    """What the ACP message is (variant, method, field): a short phrase for the docs."""

    @property
    def kind(self) -> str:
        return str(self.event.__dataclass_fields__["kind"].default)


def _update(
    event: type[ev.EventBase],
    updates: tuple[str, ...],
    render: str,
    note: str,
    *,
    capability: str = "",
) -> AcpRow:
    return AcpRow(event=event, form="update", method="session/update", updates=updates,
                  render=render, exact=True, capability=capability, note=note)  # fmt: skip


def _channel(event: type[ev.EventBase]) -> AcpRow:
    return AcpRow(event=event, form="event channel", method=EVENT_CHANNEL, exact=False,
                  note=f"only `{EVENT_CHANNEL}`")  # fmt: skip


_MESSAGE, _THOUGHT, _USER = "agent_message_chunk", "agent_thought_chunk", "user_message_chunk"
_TOOL, _TOOL_UPDATE = "tool_call", "tool_call_update"
_COMPACTION, _SUMMARY = "compaction_update", "compaction_summary_chunk"
_FOLDED = (
    "; `session/load` replays a message's consecutive deltas as one chunk"
    " (`_meta.steerable.last_seq`)"
)

TABLE: tuple[AcpRow, ...] = (
    AcpRow(event=ev.RunStarted, form="prompt request", method="session/prompt", exact=False,
           meaning=("trace_id",),
           note="implied by the `session/prompt` request; trace_id in the response's"
           " `_meta.steerable.trace_id` (error: data.traceId)"),
    AcpRow(event=ev.RunFinished, form="prompt response", method="session/prompt", exact=True,
           note="`stopReason` (max_steps → max_turn_requests, interrupted → end_turn, rejected"
           " → cancelled), `usage`; the event in `_meta.steerable.event`"),
    AcpRow(event=ev.RunFailed, form="JSON-RPC error", method="session/prompt", exact=True,
           note="error on `session/prompt`: data.code, message, runId; the event in"
           " data.event"),
    _channel(ev.StepStarted),
    _channel(ev.StepFinished),
    _channel(ev.ModelRequestEvent),
    _channel(ev.ModelResponseEvent),
    _channel(ev.TextStart),
    _update(ev.TextDelta, (_MESSAGE,), "_text_delta",
            f"`{_MESSAGE}` (text, messageId){_FOLDED}"),
    _channel(ev.TextEnd),
    _channel(ev.ReasoningStart),
    _update(ev.ReasoningDelta, (_THOUGHT,), "_reasoning_delta",
            f"`{_THOUGHT}` (text, messageId){_FOLDED}"),
    _channel(ev.ReasoningEnd),
    _channel(ev.ToolCallStart),
    _channel(ev.ToolCallDelta),
    _update(ev.ToolCallEnd, (_TOOL,), "_tool_call_end",
            f"`{_TOOL}`: pending, kind, title, locations, rawInput"),
    _update(ev.ToolStarted, (_TOOL_UPDATE,), "_tool_started",
            f"`{_TOOL_UPDATE}` in_progress; the command sandbox (bwrap / none / client) in"
            " `_meta.steerable.sandbox`"),
    _update(ev.ToolOutput, (_TOOL_UPDATE,), "_tool_output",
            f"`{_TOOL_UPDATE}` with the content so far"),
    _update(ev.ToolFinished, (_TOOL_UPDATE,), "_tool_finished",
            f"`{_TOOL_UPDATE}` completed / failed, content, rawOutput"),
    AcpRow(event=ev.PermissionRequested, form="client request",
           method="session/request_permission", exact=True,
           note="`session/request_permission` (5 options); the event in"
           " `_meta.steerable.event`"),
    AcpRow(event=ev.PermissionResolved, form="client request",
           method="session/request_permission", exact=False,
           meaning=("call_id", "outcome", "option_id"),
           note="the client's answer to `session/request_permission`"),
    AcpRow(event=ev.QuestionAsked, form="client request", method="elicitation/create",
           exact=True,
           note="`elicitation/create` (form: message, requestedSchema; url: message,"
           " elicitationId = <sessionId>/question_id, url; sessionId, toolCallId = call_id);"
           " the event in `_meta.steerable.event`"),
    AcpRow(event=ev.QuestionAnswered, form="client request", method="elicitation/create",
           exact=False, meaning=("question_id", "action", "content_json", "call_id"),
           note="the client's answer to `elicitation/create` (action accept / decline /"
           " cancel, content)"),
    AcpRow(event=ev.QuestionCompleted, form="notification", method="elicitation/complete",
           exact=True,
           note="`elicitation/complete` (elicitationId = <sessionId>/question_id); the event"
           " in `_meta.steerable.event`"),
    AcpRow(event=ev.UserMessage, form="prompt request", method="session/prompt",
           updates=(_USER,), render="_user_message", exact=False, meaning=("content",),
           note=f"the `session/prompt` request itself; replayed as `{_USER}` by"
           " `session/load`"),
    _update(ev.SteerApplied, (_USER,), "_user_message", f"`{_USER}`, one per content part"),
    _update(ev.FollowUpApplied, (_USER,), "_user_message",
            f"`{_USER}`, one per content part"),
    _update(ev.PlanUpdated, ("plan",), "_plan_updated", "`plan` (the whole plan)"),
    _channel(ev.StateSnapshot),
    _channel(ev.StateDelta),
    _update(ev.ModeChanged, ("current_mode_update",), "_mode_changed",
            "`current_mode_update`"),
    _update(ev.ConfigChanged, ("config_option_update",), "_config_changed",
            "`config_option_update` (option `model` only)"),
    _update(ev.CommandsUpdated, ("available_commands_update",), "_commands_updated",
            "`available_commands_update`"),
    _update(ev.SessionInfo, ("session_info_update",), "_session_info",
            "`session_info_update` (title, updatedAt)"),
    _update(ev.UsageUpdated, ("usage_update",), "_usage_updated",
            "`usage_update` (used, size; cache read / creation tokens in `_meta`; not sent"
            " while the context window is unknown)"),
    _channel(ev.HookAction),
    _channel(ev.BudgetExhausted),
    _channel(ev.SoftTimeout),
    _update(ev.CompactionStarted, (_COMPACTION,), "_compaction_stream",
            f"only to a client that advertised `session.compaction`: `{_COMPACTION}`"
            " in_progress (compactionId = compaction_id; trigger in `_meta.steerable`), sent"
            " when the summary request starts", capability="compaction"),
    _update(ev.CompactionSummaryDelta, (_SUMMARY,), "_compaction_stream",
            f"only to a client that advertised `session.compaction`: `{_SUMMARY}` (text), one"
            " per piece as the model writes the summary; `session/load` replays a"
            " compaction's consecutive pieces as one chunk (`_meta.steerable.last_seq`)",
            capability="compaction"),
    _update(ev.Compaction, (_COMPACTION, _SUMMARY, _MESSAGE), "_compaction",
            "to a client that advertised `session.compaction`: a streamed summary"
            f" (compaction_id set) ends with `{_COMPACTION}` completed (`summary` = the"
            " stored summary, every field in `_meta.steerable`); a micro fold is"
            f" `{_COMPACTION}` (compactionId compaction-<seq>, in_progress), its headline as"
            f" `{_SUMMARY}`, then `{_COMPACTION}` completed; to any other client"
            f" `{_MESSAGE}` (messageId compaction-<seq>): its headline, e.g. \"Compacted 3"
            " turns: 6,120 → 1,450 tokens.\", every field in `_meta.steerable`. Either is the"
            " reply to `/compact`"),
    _update(ev.CompactionDropped, (_COMPACTION,), "_compaction_stream",
            f"only to a client that advertised `session.compaction`: `{_COMPACTION}` cancelled"
            " (reason cancelled) or failed (declined, failed), `error` = detail; reason and"
            " detail in `_meta.steerable`", capability="compaction"),
    _update(ev.Notice, ("notice", _MESSAGE), "_notice",
            "to a client that advertised `session.notices`: `notice` (severity, title,"
            f" description); to any other client `{_MESSAGE}` (messageId notice-<seq>): the"
            " title and description as text. Live only: `session/load` does not replay it"),
)  # fmt: skip

_BY_KIND: dict[str, AcpRow] = {row.kind: row for row in TABLE}


def by_kind(kind: str) -> AcpRow | None:
    """The row of `kind` (None: the table lacks it; `tests/transports/acp` says so)."""
    return _BY_KIND.get(kind)
