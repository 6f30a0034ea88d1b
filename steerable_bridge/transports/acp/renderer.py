"""LoopEvent → ACP `session/update` payloads: a pure, per-session renderer with no I/O.

`AcpRenderer(routes=...).render(event)` returns the SDK update models (`acp.schema`) that
one event becomes, in order; the agent wraps each in a `session/update` notification. The
renderer keeps only its own bookkeeping (the content each open tool call has shown so far,
because a `tool_call_update` replaces the call's content list). It never sends, reads the
clock or touches a session. `echo_user=True` (session/load replay) also renders the user's
own prompts; live, the client already shows them.

| LoopEvent                    | ACP update (`sessionUpdate`)                                  |
|------------------------------|---------------------------------------------------------------|
| text_delta                   | agent_message_chunk (text, messageId = message_id)            |
| reasoning_delta              | agent_thought_chunk (text, messageId = message_id)            |
| user_message (echo_user)     | user_message_chunk, one per content part                      |
| steer_applied, follow_up_... | user_message_chunk, one per content part (always)             |
| tool_call_end                | tool_call: status pending, kind, title, locations, rawInput   |
| tool_started                 | tool_call_update: status in_progress (`_meta` sandbox)        |
| tool_output                  | tool_call_update: content = every output part so far          |
| tool_finished                | tool_call_update: completed / failed (cancelled → failed),    |
|                              | content (text, diff, terminal, ...), rawOutput                |
| plan_updated                 | plan (the whole plan; each replaces the last)                 |
| usage_updated                | usage_update (size = context window; none when it is unknown) |
| session_info                 | session_info_update (title, updatedAt = ts as ISO 8601)       |
| mode_changed                 | current_mode_update                                           |
| config_changed "model"       | config_option_update (the full option list)                   |
| commands_updated             | available_commands_update                                     |
| compaction_started (c=True)  | compaction_update in_progress (compactionId = compaction_id)  |
| compaction_summary_delta     | compaction_summary_chunk (text), as the model writes it       |
| (compaction=True)            |                                                               |
| compaction (compaction=True) | streamed (compaction_id set): compaction_update completed,    |
|                              | `summary` = the stored summary; otherwise (a micro fold):     |
|                              | compaction_update in_progress (compactionId                   |
|                              | `compaction-<seq>`), compaction_summary_chunk (the summary),  |
|                              | compaction_update completed; the reply to `/compact`          |
| compaction_dropped (c=True)  | compaction_update cancelled (cancelled) / failed (declined,   |
|                              | failed), `error` = detail                                     |
| compaction (otherwise)       | agent_message_chunk: its `headline` and a blank line          |
|                              | (messageId `compaction-<seq>`), e.g. the reply to `/compact`; |
|                              | its start, deltas and drop show nothing                       |
| notice (notices=True)        | notice (severity, title, description); never in a replay      |
| notice (otherwise)           | agent_message_chunk (messageId `notice-<seq>`): title, detail |
| run_finished / run_failed    | nothing here: the session/prompt response (`stop_reason`)     |
| every other kind             | nothing (only the opt-in `_steerable/event` channel has them) |

**`_meta` (for decoders).** Every update carries `_meta.steerable` with `kind`, `seq`, `ts`
and `run_id` of its event, plus what the ACP payload cannot hold exactly:

- user_message / steer_applied / follow_up_applied: `message_id`, `part` (0-based index)
  and `parts` (count); the event is whole once `part == parts - 1`.
- tool_call_end: `name`, `title` (the ACP title falls back to the name when it is empty),
  `arguments_json` (exact text; rawInput is its parse, or the text itself when it is not
  JSON), `executor`.
- tool_started: `sandbox` — what confines the command (`bwrap`, `none`, `client`), null
  for tools that run none.
- tool_output: `parts` — the event's own content is the last `parts` items of `content`.
- tool_finished: `status` (completed / failed / cancelled), `error` ({code, message} or
  null), `raw_output_json` (exact text) and `parts` — the event's content is the first
  `parts` items; a failure without content shows the error message as one text item.
- text_delta / reasoning_delta replayed by `session/load`: `last_seq` when the chunk folds
  the consecutive deltas of one message with seqs `seq`..`last_seq` (their text joined;
  `seq` and `ts` are the first one's). Clients do not depend on chunk boundaries, so a load
  sends each message's text as one chunk; the `_steerable/event` channel stays exact.
- usage_updated: `size` (null when unknown), `cache_read_tokens` and
  `cache_creation_tokens` (prompt tokens the provider's cache served / stored).
  config_changed: `option_id`, `value`.
- session_info: `title` (may be null).
- compaction: every field of the event (`summary`, `through_seq`, `trigger`, `scope`,
  `pre_tokens`, `post_tokens`, `fallback`, `notice`, `turns`); the text is only its
  headline. As v1.25 compaction updates, the completed `compaction_update` carries them
  (for a compaction that did not stream, the first two updates carry `kind`, `seq`, `ts`,
  `run_id` and `part`: 0 for the opening update, 1 for the summary chunk), so a decoder
  rebuilds the event from that one. A streamed summary's chunks join to the stored summary
  unless it is the digest or was clipped; the completed update's `summary` (a complete
  replacement, by the spec's patch semantics) is the stored one either way.
- compaction_started: `trigger`. compaction_dropped: `reason` and `detail`.
- compaction_summary_delta replayed by `session/load`: `last_seq`, as for text deltas.
- notice: `severity`, `title` and `description` (the fallback's text is only a rendering).

`compaction=True` / `notices=True` say the client advertised `session.compaction` /
`session.notices` (ACP schema 1.25; the SDK 0.12.1 models lack those updates, so they are
the generated `schema/stable.py` models, imported on first use). The spec sends notices only
to a client that asked, and says an agent may use an agent message otherwise; a replay
(`echo_user=True`) renders no notice at all: notices are live, not session history.

Content parts map text → text block, image → image block, resource with text → embedded
`resource`, resource without text → `resource_link`, diff → `diff`, terminal → `terminal`.
A block's own `_meta.steerable.name` keeps a resource's name where ACP cannot: an embedded
resource has no name field, and a link without a name shows its uri (`name: null`).
Updates the agent sends *without* `_meta.steerable` are not LoopEvents: the short replies to
the slash commands `/help`, `/mode`, `/model` (`slash.py`), which are not logged or replayed.
Stop reasons (`stop_reason`): end_turn, max_tokens, refusal, cancelled as is;
max_steps → max_turn_requests; interrupted (the run waits for a client answer, which ACP
has no way to give — it cannot happen with ACP's ask-now permissions) → end_turn; rejected
(the user picked "Reject and stop") → cancelled, the one ACP reason that says the user
stopped the turn (end_turn would claim the agent finished, refusal that the model refused);
the original reason is in the response's `_meta.steerable.stop_reason`. The agent also puts the
run's closing event (run_finished, or run_failed in the error's `data.event`) in
`_meta.steerable.event`, so decoders rebuild it exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from acp import schema as acp

from steerable_bridge.runtime import codec
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent, StopReason
from steerable_bridge.runtime.values import (
    Command,
    ContentPart,
    DiffContent,
    ImagePart,
    TerminalContent,
    TextPart,
    ToolContent,
)

__all__ = [
    "AcpRenderer",
    "AcpStopReason",
    "SdkUpdate",
    "Update",
    "content_block",
    "iso_time",
    "mode_state",
    "model_options",
    "stop_reason",
    "tool_content",
]

SdkUpdate = (
    acp.UserMessageChunk
    | acp.AgentMessageChunk
    | acp.AgentThoughtChunk
    | acp.ToolCallStart
    | acp.ToolCallProgress
    | acp.AgentPlanUpdate
    | acp.AvailableCommandsUpdate
    | acp.CurrentModeUpdate
    | acp.ConfigOptionUpdate
    | acp.SessionInfoUpdate
    | acp.UsageUpdate
)
"""The `session/update` payloads the SDK's models hold."""

if TYPE_CHECKING:
    from steerable_bridge.transports.acp.schema import stable

    Update = SdkUpdate | stable.SessionUpdate12 | stable.SessionUpdate13 | stable.SessionUpdate14
else:  # the v1.25 models load on first use; at run time the alias only annotates
    Update = SdkUpdate
"""Every `session/update` payload this renderer produces: the SDK's, and the v1.25
`notice` / `compaction_update` / `compaction_summary_chunk` (`schema/stable.py`)."""

AcpStopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

_STOP: dict[StopReason, AcpStopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "max_steps": "max_turn_requests",
    "refusal": "refusal",
    "cancelled": "cancelled",
    "interrupted": "end_turn",
    "rejected": "cancelled",
}

ContentBlock = (
    acp.TextContentBlock
    | acp.ImageContentBlock
    | acp.ResourceContentBlock
    | acp.EmbeddedResourceContentBlock
)
ToolCallContent = (
    acp.ContentToolCallContent | acp.FileEditToolCallContent | acp.TerminalToolCallContent
)


def stop_reason(reason: StopReason) -> AcpStopReason:
    """The ACP stop reason for a runtime one (see the module docstring)."""
    return _STOP[reason]


def content_block(part: ContentPart) -> ContentBlock:
    """One message content part as an ACP content block."""
    if isinstance(part, TextPart):
        return acp.TextContentBlock(type="text", text=part.text)
    if isinstance(part, ImagePart):
        return acp.ImageContentBlock(
            type="image", data=part.data, mime_type=part.mime_type, uri=part.uri
        )
    if part.text is not None:
        return acp.EmbeddedResourceContentBlock(
            type="resource",
            resource=acp.TextResourceContents(
                uri=part.uri, text=part.text, mime_type=part.mime_type
            ),
            # An embedded resource has no name field; keep it for decoders.
            field_meta={"steerable": {"name": part.name}} if part.name is not None else None,
        )
    return acp.ResourceContentBlock(
        type="resource_link",
        uri=part.uri,
        name=part.name or part.uri,
        mime_type=part.mime_type,
        # `name` is required on a link; say when it only repeats the uri.
        field_meta={"steerable": {"name": None}} if part.name is None else None,
    )


def tool_content(part: ToolContent) -> ToolCallContent:
    """One tool result part as ACP tool call content."""
    if isinstance(part, DiffContent):
        return acp.FileEditToolCallContent(
            type="diff", path=part.path, old_text=part.old_text, new_text=part.new_text
        )
    if isinstance(part, TerminalContent):
        return acp.TerminalToolCallContent(type="terminal", terminal_id=part.terminal_id)
    return acp.ContentToolCallContent(type="content", content=content_block(part))


def mode_state(current: str, modes: Sequence[tuple[str, str, str]]) -> acp.SessionModeState:
    """The `modes` a session offers ((id, name, description), as `PortInfo.modes` lists
    them) with the current one."""
    return acp.SessionModeState(
        current_mode_id=current,
        available_modes=[
            acp.SessionMode(id=mode_id, name=name, description=description)
            for mode_id, name, description in modes
        ],
    )


def model_options(routes: Sequence[str], current: str) -> list[acp.SessionConfigOptionSelect]:
    """The session's config options: one `model` select over the configured routes."""
    values = list(routes) if current in routes else [current, *routes]
    return [
        acp.SessionConfigOptionSelect(
            type="select",
            id="model",
            name="Model",
            description="The model route (provider:model) the next prompt uses",
            category="model",
            current_value=current,
            options=[acp.SessionConfigSelectOption(value=route, name=route) for route in values],
        )
    ]


def _commands(commands: Sequence[Command]) -> list[acp.AvailableCommand]:
    return [
        acp.AvailableCommand(
            name=command.name,
            description=command.description,
            input=(
                acp.AvailableCommandInput(
                    root=acp.UnstructuredCommandInput(hint=command.input_hint)
                )
                if command.input_hint is not None
                else None
            ),
        )
        for command in commands
    ]


def _raw(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def iso_time(ts_ms: int) -> str:
    """Milliseconds since the epoch as ISO 8601 UTC (`2026-01-01T12:00:00.123000Z`)."""
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


class AcpRenderer:
    """Renders one session's LoopEvents as ACP updates; create one per session and replay."""

    def __init__(
        self,
        *,
        routes: Sequence[str] = (),
        echo_user: bool = False,
        notices: bool = False,
        compaction: bool = False,
    ) -> None:
        self.routes = tuple(routes)
        self.echo_user = echo_user
        self.notices = notices
        self.compaction = compaction
        self._output: dict[str, list[ToolCallContent]] = {}

    def _notice(self, event: ev.Notice, meta: Callable[..., dict[str, Any]]) -> list[Update]:
        if self.notices:
            from steerable_bridge.transports.acp.schema import stable

            return [
                stable.SessionUpdate12(
                    session_update="notice",
                    severity=stable.NoticeSeverity(event.severity),
                    title=event.title,
                    description=event.description,
                    field_meta=meta(),
                )
            ]
        text = event.title + (f"\n\n{event.description}" if event.description else "")
        return [
            acp.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=acp.TextContentBlock(type="text", text=text + "\n\n"),
                message_id=f"notice-{event.seq}",
                field_meta=meta(
                    severity=event.severity, title=event.title, description=event.description
                ),
            )
        ]

    def render(self, event: LoopEvent, *, last_seq: int | None = None) -> list[Update]:
        """The updates `event` becomes (often none), in the order they must be sent.
        `last_seq` above the event's seq says it is a replayed delta folding the deltas of
        seqs `seq`..`last_seq` (`runtime/replay.py`); its `_meta.steerable` then carries it."""
        base: dict[str, Any] = {
            "kind": event.kind,
            "seq": event.seq,
            "ts": event.ts,
            "run_id": event.run_id,
        }
        if last_seq is not None and last_seq > event.seq:
            base["last_seq"] = last_seq

        def meta(**extra: Any) -> dict[str, Any]:
            return {"steerable": {**base, **extra}}

        if isinstance(event, ev.TextDelta):
            return [
                acp.AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=acp.TextContentBlock(type="text", text=event.delta),
                    message_id=event.message_id,
                    field_meta=meta(),
                )
            ]
        if isinstance(event, ev.ReasoningDelta):
            return [
                acp.AgentThoughtChunk(
                    session_update="agent_thought_chunk",
                    content=acp.TextContentBlock(type="text", text=event.delta),
                    message_id=event.message_id,
                    field_meta=meta(),
                )
            ]
        if isinstance(event, ev.Notice):
            return self._notice(event, meta) if not self.echo_user else []
        if isinstance(
            event, ev.CompactionStarted | ev.CompactionSummaryDelta | ev.CompactionDropped
        ):
            return _compaction_progress(event, meta) if self.compaction else []
        if isinstance(event, ev.Compaction):
            fields = codec.event_to_jsonable(event)
            for key in ("session_id", "run_id", "seq", "ts", "kind"):
                del fields[key]
            if self.compaction:
                return _compaction_updates(event, meta, fields)
            return [
                acp.AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=acp.TextContentBlock(type="text", text=event.headline + "\n\n"),
                    message_id=f"compaction-{event.seq}",
                    field_meta=meta(**fields),
                )
            ]
        if isinstance(event, ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied):
            if isinstance(event, ev.UserMessage) and not self.echo_user:
                return []
            count = len(event.content)
            return [
                acp.UserMessageChunk(
                    session_update="user_message_chunk",
                    content=content_block(part),
                    message_id=event.message_id,
                    field_meta=meta(message_id=event.message_id, part=index, parts=count),
                )
                for index, part in enumerate(event.content)
            ]
        if isinstance(event, ev.ToolCallEnd):
            self._output[event.call_id] = []
            return [
                acp.ToolCallStart(
                    session_update="tool_call",
                    tool_call_id=event.call_id,
                    title=event.title or event.name,
                    kind=event.tool_kind,
                    status="pending",
                    locations=[
                        acp.ToolCallLocation(path=loc.path, line=loc.line)
                        for loc in event.locations
                    ]
                    or None,
                    raw_input=_raw(event.arguments_json) if event.arguments_json else {},
                    field_meta=meta(
                        name=event.name,
                        title=event.title,
                        arguments_json=event.arguments_json,
                        executor=event.executor,
                    ),
                )
            ]
        if isinstance(event, ev.ToolStarted):
            return [
                acp.ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=event.call_id,
                    status="in_progress",
                    field_meta=meta(sandbox=event.sandbox),
                )
            ]
        if isinstance(event, ev.ToolOutput):
            shown = self._output.setdefault(event.call_id, [])
            shown.extend(tool_content(part) for part in event.content)
            return [
                acp.ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=event.call_id,
                    content=list(shown),
                    field_meta=meta(parts=len(event.content)),
                )
            ]
        if isinstance(event, ev.ToolFinished):
            self._output.pop(event.call_id, None)
            content = [tool_content(part) for part in event.content]
            if not content and event.error is not None:
                content = [tool_content(TextPart(text=event.error.message))]
            error = (
                {"code": event.error.code, "message": event.error.message}
                if event.error is not None
                else None
            )
            return [
                acp.ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=event.call_id,
                    status="completed" if event.status == "completed" else "failed",
                    content=content,
                    raw_output=(
                        _raw(event.raw_output_json) if event.raw_output_json is not None else None
                    ),
                    field_meta=meta(
                        status=event.status,
                        error=error,
                        raw_output_json=event.raw_output_json,
                        parts=len(event.content),
                    ),
                )
            ]
        if isinstance(event, ev.PlanUpdated):
            return [
                acp.AgentPlanUpdate(
                    session_update="plan",
                    entries=[
                        acp.PlanEntry(content=e.content, priority=e.priority, status=e.status)
                        for e in event.entries
                    ],
                    field_meta=meta(),
                )
            ]
        if isinstance(event, ev.UsageUpdated):
            if not event.size:  # the window is unknown: no "used of 0" for editors to draw
                return []
            return [
                acp.UsageUpdate(
                    session_update="usage_update",
                    used=event.used,
                    size=event.size,
                    field_meta=meta(
                        size=event.size,
                        cache_read_tokens=event.cache_read_tokens,
                        cache_creation_tokens=event.cache_creation_tokens,
                    ),
                )
            ]
        if isinstance(event, ev.SessionInfo):
            return [
                acp.SessionInfoUpdate(
                    session_update="session_info_update",
                    title=event.title,
                    updated_at=iso_time(event.ts),
                    field_meta=meta(title=event.title),
                )
            ]
        if isinstance(event, ev.ModeChanged):
            return [
                acp.CurrentModeUpdate(
                    session_update="current_mode_update",
                    current_mode_id=event.mode_id,
                    field_meta=meta(),
                )
            ]
        if isinstance(event, ev.ConfigChanged):
            if event.option_id != "model":
                return []
            return [
                acp.ConfigOptionUpdate(
                    session_update="config_option_update",
                    config_options=list(model_options(self.routes, event.value)),
                    field_meta=meta(option_id=event.option_id, value=event.value),
                )
            ]
        if isinstance(event, ev.CommandsUpdated):
            return [
                acp.AvailableCommandsUpdate(
                    session_update="available_commands_update",
                    available_commands=_commands(event.commands),
                    field_meta=meta(),
                )
            ]
        return []


def _compaction_updates(
    event: ev.Compaction, meta: Callable[..., dict[str, Any]], fields: dict[str, Any]
) -> list[Update]:
    """A compaction as the v1.25 lifecycle: opened, its summary, completed (only the end
    when its start and summary already went out as their own events)."""
    from steerable_bridge.transports.acp.schema import stable

    summary = event.summary or event.headline  # a fold of tool results has no summary text
    if event.compaction_id:
        return [
            stable.SessionUpdate13(
                session_update="compaction_update",
                compaction_id=stable.CompactionId(event.compaction_id),
                status=stable.CompactionStatus("completed"),
                summary=[stable.ContentBlock(stable.ContentBlock1(type="text", text=summary))],
                field_meta=meta(**fields),
            )
        ]
    compaction_id = stable.CompactionId(f"compaction-{event.seq}")
    return [
        stable.SessionUpdate13(
            session_update="compaction_update",
            compaction_id=compaction_id,
            status=stable.CompactionStatus("in_progress"),
            field_meta=meta(part=0),
        ),
        stable.SessionUpdate14(
            session_update="compaction_summary_chunk",
            compaction_id=compaction_id,
            content=stable.ContentBlock(stable.ContentBlock1(type="text", text=summary)),
            field_meta=meta(part=1),
        ),
        stable.SessionUpdate13(
            session_update="compaction_update",
            compaction_id=compaction_id,
            status=stable.CompactionStatus("completed"),
            field_meta=meta(**fields),
        ),
    ]


_DROPPED_STATUS = {"cancelled": "cancelled", "declined": "failed", "failed": "failed"}


def _compaction_progress(
    event: ev.CompactionStarted | ev.CompactionSummaryDelta | ev.CompactionDropped,
    meta: Callable[..., dict[str, Any]],
) -> list[Update]:
    """A streamed compaction's start, one piece of its summary, or its drop (v1.25)."""
    from steerable_bridge.transports.acp.schema import stable

    compaction_id = stable.CompactionId(event.compaction_id)
    if isinstance(event, ev.CompactionSummaryDelta):
        return [
            stable.SessionUpdate14(
                session_update="compaction_summary_chunk",
                compaction_id=compaction_id,
                content=stable.ContentBlock(stable.ContentBlock1(type="text", text=event.delta)),
                field_meta=meta(),
            )
        ]
    if isinstance(event, ev.CompactionStarted):
        return [
            stable.SessionUpdate13(
                session_update="compaction_update",
                compaction_id=compaction_id,
                status=stable.CompactionStatus("in_progress"),
                field_meta=meta(trigger=event.trigger),
            )
        ]
    return [
        stable.SessionUpdate13(
            session_update="compaction_update",
            compaction_id=compaction_id,
            status=stable.CompactionStatus(_DROPPED_STATUS[event.reason]),
            error=event.detail or None,
            field_meta=meta(reason=event.reason, detail=event.detail),
        )
    ]
