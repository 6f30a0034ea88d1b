"""LoopEvent → ACP `session/update` payloads: a pure, per-session renderer with no I/O.

`AcpRenderer(routes=...).render(event)` returns the SDK update models (`acp.schema`) that
one event becomes, in order; the agent wraps each in a `session/update` notification. Which
updates a kind becomes is the table in `mapping.py` (one row per kind naming the method here
that renders it; also `docs/mapping.md`): a kind without a method shows nothing but on the
opt-in `_steerable/event` channel, and run_finished / run_failed are the `session/prompt`
response, not updates. The renderer keeps only its own bookkeeping (the content each open
tool call has shown so far, since a `tool_call_update` replaces the list); it never sends,
reads the clock or touches a session.

The contract decoders rely on: every update carries `_meta.steerable` with its event's
`kind`, `seq`, `ts` and `run_id`, plus what the ACP payload cannot hold exactly (field by
field in `docs/acp-meta.md`); an update without it (the slash commands' short replies) is
not a LoopEvent. `echo_user=True` (session/load replay) also renders the user's own prompts
and no notice; `compaction=True` / `notices=True` say the client advertised
`session.compaction` / `session.notices` (ACP 1.25, the generated `schema/stable.py`
models, imported on first use); without them a compaction or notice is an agent message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
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
from steerable_bridge.transports.acp.mapping import TABLE

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


_Meta = Callable[..., dict[str, Any]]
"""Makes an update's `_meta` from the event's own fields plus the given ones."""


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

    def _notice_update(self, event: ev.Notice, meta: _Meta) -> list[Update]:
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
        seqs `seq`..`last_seq` (`runtime/session_log/replay.py`); its `_meta.steerable` then
        carries it."""
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

        handler = _RENDER.get(type(event))
        return handler(self, event, meta) if handler is not None else []

    def _text_delta(self, event: ev.TextDelta, meta: _Meta) -> list[Update]:
        return [
            acp.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=acp.TextContentBlock(type="text", text=event.delta),
                message_id=event.message_id,
                field_meta=meta(),
            )
        ]

    def _reasoning_delta(self, event: ev.ReasoningDelta, meta: _Meta) -> list[Update]:
        return [
            acp.AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=acp.TextContentBlock(type="text", text=event.delta),
                message_id=event.message_id,
                field_meta=meta(),
            )
        ]

    def _notice(self, event: ev.Notice, meta: _Meta) -> list[Update]:
        return self._notice_update(event, meta) if not self.echo_user else []

    def _compaction_stream(
        self,
        event: ev.CompactionStarted | ev.CompactionSummaryDelta | ev.CompactionDropped,
        meta: _Meta,
    ) -> list[Update]:
        return _compaction_progress(event, meta) if self.compaction else []

    def _compaction(self, event: ev.Compaction, meta: _Meta) -> list[Update]:
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

    def _user_message(
        self, event: ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied, meta: _Meta
    ) -> list[Update]:
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

    def _tool_call_end(self, event: ev.ToolCallEnd, meta: _Meta) -> list[Update]:
        self._output[event.call_id] = []
        return [
            acp.ToolCallStart(
                session_update="tool_call",
                tool_call_id=event.call_id,
                title=event.title or event.name,
                kind=event.tool_kind,
                status="pending",
                locations=[
                    acp.ToolCallLocation(path=loc.path, line=loc.line) for loc in event.locations
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

    def _tool_started(self, event: ev.ToolStarted, meta: _Meta) -> list[Update]:
        return [
            acp.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=event.call_id,
                status="in_progress",
                field_meta=meta(sandbox=event.sandbox),
            )
        ]

    def _tool_output(self, event: ev.ToolOutput, meta: _Meta) -> list[Update]:
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

    def _tool_finished(self, event: ev.ToolFinished, meta: _Meta) -> list[Update]:
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

    def _plan_updated(self, event: ev.PlanUpdated, meta: _Meta) -> list[Update]:
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

    def _usage_updated(self, event: ev.UsageUpdated, meta: _Meta) -> list[Update]:
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

    def _session_info(self, event: ev.SessionInfo, meta: _Meta) -> list[Update]:
        return [
            acp.SessionInfoUpdate(
                session_update="session_info_update",
                title=event.title,
                updated_at=iso_time(event.ts),
                field_meta=meta(title=event.title),
            )
        ]

    def _mode_changed(self, event: ev.ModeChanged, meta: _Meta) -> list[Update]:
        return [
            acp.CurrentModeUpdate(
                session_update="current_mode_update",
                current_mode_id=event.mode_id,
                field_meta=meta(),
            )
        ]

    def _config_changed(self, event: ev.ConfigChanged, meta: _Meta) -> list[Update]:
        if event.option_id != "model":
            return []
        return [
            acp.ConfigOptionUpdate(
                session_update="config_option_update",
                config_options=list(model_options(self.routes, event.value)),
                field_meta=meta(option_id=event.option_id, value=event.value),
            )
        ]

    def _commands_updated(self, event: ev.CommandsUpdated, meta: _Meta) -> list[Update]:
        return [
            acp.AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=_commands(event.commands),
                field_meta=meta(),
            )
        ]


_RENDER: dict[type[ev.EventBase], Callable[[AcpRenderer, Any, _Meta], list[Update]]] = {
    row.event: getattr(AcpRenderer, row.render) for row in TABLE if row.render is not None
}
"""The update each kind becomes, as `mapping.TABLE` names its method; a kind without one
shows nothing (the opt-in `_steerable/event` channel has it)."""


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
