"""What a bridged ACP agent says → LoopEvents: one stateful mapper per child prompt, no I/O.

`UpdateMapper.update(update)` turns one `session/update` payload (an SDK model) into the
LoopEvents that carry it, as `(event class, fields)` pairs the engine records through the
turn's recorder; `permission(tool_call)` does the same for the call a
`session/request_permission` names; `close(...)` ends whatever the prompt left open. It
never assumes the agent is ours (no `_meta.steerable` needed; when present it names the
tool, and a result's exact status — `cancelled` too —, error and content) and ignores
update kinds it does not know.

| ACP update                          | LoopEvents                                               |
|-------------------------------------|----------------------------------------------------------|
| agent_message_chunk (text)          | text_start (new message id), text_delta; text_end when   |
|                                     | the message id changes, a thought or tool call begins    |
| agent_thought_chunk (text)          | reasoning_start / reasoning_delta / reasoning_end, alike  |
| tool_call                           | tool_call_start; its end (one tool_call_delta with the   |
|                                     | whole rawInput, tool_call_end with kind, title,          |
|                                     | locations) at once when it has rawInput, else when the   |
|                                     | call runs or asks (agents often send it in an update)    |
| tool_call_update                    | in_progress → tool_started; content while running →      |
|                                     | tool_output (the new parts); completed / failed →        |
|                                     | tool_finished (content: text, diff, terminal; rawOutput) |
| plan                                | plan_updated                                             |
| usage_update                        | usage_updated (used, size)                               |
| session_info_update (title)         | session_info                                             |
| available_commands_update           | commands_updated                                         |
| current_mode_update                 | mode_changed                                             |
| config_option_update                | config_changed per option, id prefixed `acp.option.`     |
| compaction_update,                  | compaction_started / compaction_summary_delta /          |
| compaction_summary_chunk (v1.25)    | compaction / compaction_dropped (`compaction.py`)        |
| user_message_chunk, anything else   | nothing (the user's side is ours; unknown kinds logged)  |

A call the agent never finished gets a `cancelled` result at `close`, so the log never
holds a dangling call. Stop reasons map back as ACP's own, `max_turn_requests` →
`max_steps`; `PromptResponse.usage` becomes the run's `Usage`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.values import (
    Command,
    DiffContent,
    ImagePart,
    Location,
    PlanEntry,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolContent,
    ToolError,
    ToolKind,
    Usage,
    canonical_json,
)
from steerable_bridge.transports.acp.bridge.compaction import ChildCompaction, CompactionMapper

__all__ = [
    "OPTION_PREFIX",
    "Emission",
    "UpdateMapper",
    "run_stop_reason",
    "run_usage",
    "tool_parts",
]

log = logging.getLogger("steerable_bridge.acp.bridge")

Emission = tuple[type[ev.EventBase], dict[str, Any]]
"""One LoopEvent to record: its class and its own fields (the recorder adds the rest)."""

OPTION_PREFIX = "acp.option."
"""How a bridged agent's config options are named in our log (`config_changed`), so one
called `model` never reads as our own model route."""

_KINDS: frozenset[str] = frozenset(
    ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode")
)

_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "max_turn_requests": "max_steps",
    "refusal": "refusal",
    "cancelled": "cancelled",
}


def run_stop_reason(reason: str) -> StopReason:
    """Our stop reason for an ACP one (an unknown one reads as `end_turn`)."""
    return _STOP.get(reason, "end_turn")


def run_usage(usage: acp.Usage | None) -> Usage:
    """The run's token counts from `PromptResponse.usage` (zero when the agent gave none)."""
    if usage is None:
        return Usage()
    return Usage(
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        cached_tokens=usage.cached_read_tokens or 0,
        reasoning_tokens=usage.thought_tokens or 0,
        cache_creation_tokens=usage.cached_write_tokens or 0,
    )


def _part(block: Any) -> ToolContent | None:
    if isinstance(block, acp.TextContentBlock):
        return TextPart(text=block.text)
    if isinstance(block, acp.ImageContentBlock):
        return ImagePart(data=block.data, mime_type=block.mime_type, uri=block.uri)
    if isinstance(block, acp.EmbeddedResourceContentBlock):
        resource = block.resource
        if isinstance(resource, acp.TextResourceContents):
            return ResourcePart(uri=resource.uri, text=resource.text, mime_type=resource.mime_type)
        return ResourcePart(uri=resource.uri, mime_type=resource.mime_type)
    if isinstance(block, acp.ResourceContentBlock):
        return ResourcePart(uri=block.uri, mime_type=block.mime_type, name=block.name)
    return None  # audio: nothing in our taxonomy holds it


def tool_parts(content: Sequence[Any] | None) -> tuple[ToolContent, ...]:
    """ACP tool call content as our tool content: text, image, resource, diff, terminal."""
    parts: list[ToolContent] = []
    for item in content or ():
        if isinstance(item, acp.FileEditToolCallContent):
            parts.append(
                DiffContent(path=item.path, old_text=item.old_text, new_text=item.new_text)
            )
        elif isinstance(item, acp.TerminalToolCallContent):
            parts.append(TerminalContent(terminal_id=item.terminal_id))
        elif isinstance(item, acp.ContentToolCallContent):
            part = _part(item.content)
            if part is not None:
                parts.append(part)
    return tuple(parts)


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return json.dumps(str(value))


@dataclass(slots=True)
class _Call:
    """What the agent said so far about one tool call."""

    call_id: str
    name: str
    title: str = ""
    kind: ToolKind = "other"
    locations: tuple[Location, ...] = ()
    arguments_json: str = "{}"
    content: tuple[ToolContent, ...] = ()
    ended: bool = False
    started: bool = False
    finished: bool = False
    shown: int = 0
    """How many content parts `tool_output` already carried."""

    def take(self, update: acp.ToolCallStart | acp.ToolCallProgress | acp.ToolCallUpdate) -> None:
        if update.title:
            self.title = update.title
            if not self.ended and self.name == self.call_id:
                self.name = update.title
        if update.kind in _KINDS:
            self.kind = update.kind
        if update.locations is not None:
            self.locations = tuple(Location(path=x.path, line=x.line) for x in update.locations)
        raw = _json_text(update.raw_input)
        if raw is not None and not self.ended:
            self.arguments_json = raw


def _own(meta: Any) -> dict[str, Any]:
    """`_meta.steerable` when the agent is ours (it says more than ACP can); else empty."""
    own = meta.get("steerable") if isinstance(meta, dict) else None
    return own if isinstance(own, dict) else {}


def _steerable_name(meta: Any) -> str | None:
    name = _own(meta).get("name")
    return name if isinstance(name, str) and name else None


@dataclass(slots=True)
class UpdateMapper:
    """The LoopEvents of one child prompt, built update by update (see the module docstring)."""

    new_id: Callable[[str], str]
    text_id: str | None = None
    parent_id: str | None = None
    """The assistant message tool calls belong to: the text just streamed, else one made up."""
    reasoning_id: str | None = None
    calls: dict[str, _Call] = field(default_factory=dict)
    compactions: CompactionMapper = field(default_factory=CompactionMapper)

    # -- messages ---------------------------------------------------------------------------

    def _close_text(self, out: list[Emission]) -> None:
        if self.text_id is not None:
            out.append((ev.TextEnd, {"message_id": self.text_id}))
            self.parent_id, self.text_id = self.text_id, None

    def _close_reasoning(self, out: list[Emission]) -> None:
        if self.reasoning_id is not None:
            out.append((ev.ReasoningEnd, {"message_id": self.reasoning_id}))
            self.reasoning_id = None

    def _text(self, chunk: acp.AgentMessageChunk) -> list[Emission]:
        out: list[Emission] = []
        if not isinstance(chunk.content, acp.TextContentBlock):
            log.debug("bridged agent sent a %s message chunk; ignored", chunk.content.type)
            return out
        self._close_reasoning(out)
        if self.text_id is not None and chunk.message_id and chunk.message_id != self.text_id:
            self._close_text(out)
        if self.text_id is None:
            self.text_id = chunk.message_id or self.new_id("msg")
            out.append((ev.TextStart, {"message_id": self.text_id}))
        if chunk.content.text:
            out.append((ev.TextDelta, {"message_id": self.text_id, "delta": chunk.content.text}))
        return out

    def _thought(self, chunk: acp.AgentThoughtChunk) -> list[Emission]:
        out: list[Emission] = []
        if not isinstance(chunk.content, acp.TextContentBlock):
            return out
        self._close_text(out)
        if (
            self.reasoning_id is not None
            and chunk.message_id
            and chunk.message_id != self.reasoning_id
        ):
            self._close_reasoning(out)
        if self.reasoning_id is None:
            self.reasoning_id = chunk.message_id or self.new_id("think")
            out.append((ev.ReasoningStart, {"message_id": self.reasoning_id}))
        if chunk.content.text:
            out.append(
                (ev.ReasoningDelta, {"message_id": self.reasoning_id, "delta": chunk.content.text})
            )
        return out

    # -- tool calls -------------------------------------------------------------------------

    def _call(
        self, update: acp.ToolCallStart | acp.ToolCallProgress | acp.ToolCallUpdate
    ) -> tuple[_Call, list[Emission]]:
        out: list[Emission] = []
        call = self.calls.get(update.tool_call_id)
        if call is None:
            parent = self.text_id or self.parent_id or self.new_id("msg")
            self.parent_id = parent
            self._close_text(out)
            self._close_reasoning(out)
            name = _steerable_name(update.field_meta) or update.title or update.tool_call_id
            call = self.calls[update.tool_call_id] = _Call(call_id=update.tool_call_id, name=name)
            out.append(
                (
                    ev.ToolCallStart,
                    {"call_id": call.call_id, "name": call.name, "parent_message_id": parent},
                )
            )
        call.take(update)
        return call, out

    def _end(self, call: _Call, out: list[Emission]) -> None:
        if call.ended:
            return
        call.ended = True
        if call.arguments_json:
            out.append((ev.ToolCallDelta, {"call_id": call.call_id, "delta": call.arguments_json}))
        out.append(
            (
                ev.ToolCallEnd,
                {
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments_json": call.arguments_json,
                    "tool_kind": call.kind,
                    "title": call.title,
                    "locations": call.locations,
                },
            )
        )

    def _start(self, call: _Call, out: list[Emission]) -> None:
        self._end(call, out)
        if not call.started:
            call.started = True
            out.append((ev.ToolStarted, {"call_id": call.call_id}))

    def _tool(self, update: acp.ToolCallStart | acp.ToolCallProgress) -> list[Emission]:
        call, out = self._call(update)
        if call.finished:
            return out
        if isinstance(update, acp.ToolCallStart) and update.raw_input is not None:
            self._end(call, out)  # its input is known: complete now, as our loop does
        content = tool_parts(update.content) if update.content is not None else None
        previous = call.content
        if content is not None:
            call.content = content
        status = update.status
        if status in ("completed", "failed"):
            self._start(call, out)
            call.finished = True
            error = None
            own = _own(update.field_meta)
            if own.get("status") in ("completed", "failed", "cancelled"):
                status = own["status"]  # ours: ACP has no `cancelled`
            if isinstance(own.get("parts"), int):  # ours: the error's text is not content
                call.content = call.content[: own["parts"]]
            if status != "completed":
                text = " ".join(p.text for p in call.content if isinstance(p, TextPart)).strip()
                given: dict[str, Any] = own["error"] if isinstance(own.get("error"), dict) else {}
                error = ToolError(
                    code=str(given.get("code") or "tool_failed"),
                    message=str(given.get("message") or text or "the bridged agent's tool failed"),
                )
            out.append(
                (
                    ev.ToolFinished,
                    {
                        "call_id": call.call_id,
                        "status": status,
                        "content": call.content,
                        "raw_output_json": _json_text(update.raw_output),
                        "error": error,
                    },
                )
            )
            return out
        if status == "in_progress":
            self._start(call, out)
        if call.started and content is not None:
            kept = content[: call.shown] == previous[: call.shown]
            fresh = content[call.shown :] if kept else content  # replaced: show it all
            if fresh:
                out.append((ev.ToolOutput, {"call_id": call.call_id, "content": fresh}))
            call.shown = len(content)
        return out

    def permission(self, tool_call: acp.ToolCallUpdate) -> tuple[list[Emission], str, str]:
        """The events that make the call a permission request names complete (so it is an
        open call the client can answer); returns them, its name and its title."""
        call, out = self._call(tool_call)
        self._end(call, out)
        return out, call.name, call.title or call.name

    # -- the rest ---------------------------------------------------------------------------

    def update(self, update: Any) -> list[Emission]:
        """The LoopEvents one `session/update` payload becomes (see the module docstring)."""
        if isinstance(update, ChildCompaction):
            return self.compactions.update(update)
        if isinstance(update, acp.AgentMessageChunk):
            return self._text(update)
        if isinstance(update, acp.AgentThoughtChunk):
            return self._thought(update)
        if isinstance(update, acp.ToolCallStart | acp.ToolCallProgress):
            return self._tool(update)
        out = session_level(update)
        if out is None:
            kind = getattr(update, "session_update", type(update).__name__)
            if kind != "user_message_chunk":
                log.debug("bridged agent sent a %s update; ignored", kind)
            return []
        return out

    def pause(self) -> list[Emission]:
        """Close the open text and reasoning messages: the run ends here (a permission
        interrupt) and the rest of the prompt streams into the next run, in new messages."""
        out: list[Emission] = []
        self._close_text(out)
        self._close_reasoning(out)
        return out

    def close(self, stop: Literal["end", "cancelled", "failed"]) -> list[Emission]:
        """Close open messages and give every unfinished call a `cancelled` result."""
        out: list[Emission] = self.compactions.close()
        self._close_text(out)
        self._close_reasoning(out)
        message = {
            "end": "the bridged agent ended its turn without finishing this call",
            "cancelled": "cancelled before it finished",
            "failed": "the bridged agent stopped before this call finished",
        }[stop]
        for call in self.calls.values():
            if call.finished:
                continue
            self._end(call, out)
            call.finished = True
            out.append(
                (
                    ev.ToolFinished,
                    {
                        "call_id": call.call_id,
                        "status": "cancelled",
                        "error": ToolError(code="cancelled", message=message),
                    },
                )
            )
        return out


def session_level(update: Any) -> list[Emission] | None:
    """The events of an update about the session rather than the turn (plan, usage, title,
    commands, mode, config options); None for any other kind."""
    if isinstance(update, acp.AgentPlanUpdate):
        entries = tuple(
            PlanEntry(content=e.content, priority=e.priority, status=e.status)
            for e in update.entries
        )
        return [(ev.PlanUpdated, {"entries": entries})]
    if isinstance(update, acp.UsageUpdate):
        return [(ev.UsageUpdated, {"used": update.used, "size": update.size or None})]
    if isinstance(update, acp.SessionInfoUpdate):
        return [(ev.SessionInfo, {"title": update.title})] if update.title else []
    if isinstance(update, acp.AvailableCommandsUpdate):
        commands = tuple(
            Command(
                name=c.name,
                description=c.description,
                input_hint=getattr(c.input.root, "hint", None) if c.input is not None else None,
            )
            for c in update.available_commands
        )
        return [(ev.CommandsUpdated, {"commands": commands})]
    if isinstance(update, acp.CurrentModeUpdate):
        return [(ev.ModeChanged, {"mode_id": update.current_mode_id})]
    if isinstance(update, acp.ConfigOptionUpdate):
        return config_options(update.config_options)
    return None


def config_options(options: Sequence[Any] | None) -> list[Emission]:
    """One `config_changed` per option the agent reports, with its current value."""
    out: list[Emission] = []
    for option in options or ():
        root = getattr(option, "root", option)
        value = getattr(root, "current_value", None)
        option_id = getattr(root, "id", None)
        if isinstance(option_id, str) and value is not None:
            text = value if isinstance(value, str) else json.dumps(value)
            out.append((ev.ConfigChanged, {"option_id": OPTION_PREFIX + option_id, "value": text}))
    return out
