"""Immutable values the runtime passes around: messages, content parts, tool calls, usage.

Every value is a frozen, slotted dataclass so that a message handed to a provider, a
renderer or a store can never change under its feet. JSON-shaped payloads (tool arguments,
raw tool output, shared state, JSON Patches) are carried as canonical JSON *text*
(`canonical_json`) rather than as mutable dicts: that keeps them immutable and makes every
round trip byte-exact. Content variants carry a `type` discriminator so that pydantic can
serialise and parse them (see `codec.py`). This module does no I/O and imports nothing from
the rest of the package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

__all__ = [
    "Advisory",
    "Command",
    "ContentPart",
    "DiffContent",
    "ImagePart",
    "Interrupt",
    "Location",
    "Message",
    "NoticeSeverity",
    "PermissionOption",
    "PlanEntry",
    "ResourcePart",
    "Role",
    "Sandbox",
    "TerminalContent",
    "TextPart",
    "ThinkingBlock",
    "ToolCall",
    "ToolContent",
    "ToolError",
    "ToolKind",
    "Usage",
    "canonical_json",
]

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
"""ACP's tool kinds; `read`, `search`, `think` and `fetch` never need permission."""

Sandbox = Literal["bwrap", "none", "client"]
"""What confines a command: a bubblewrap sandbox, nothing, or the client that ran it (the
editor's terminal; its confinement is the editor's business)."""

NoticeSeverity = Literal["info", "warning", "error"]
"""How a notice should be presented (ACP `NoticeSeverity`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Advisory:
    """Something about the whole process a user must know (e.g. commands run without a
    sandbox): each session logs it as a `notice` in its first turn in this process."""

    severity: NoticeSeverity
    title: str
    description: str | None = None


Role = Literal["system", "user", "assistant", "tool"]


def canonical_json(value: JsonValue) -> str:
    """Render a JSON value as the one text form used everywhere (compact, key order kept).

    Strict: NaN / Infinity raise `ValueError` instead of being written as text no strict
    parser reads (`strict_json.scrub` makes a value from outside safe first)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one model response, or a sum of several."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens read from the provider's prompt cache (part of `prompt_tokens`)."""
    reasoning_tokens: int = 0
    cache_creation_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache (part of `prompt_tokens`)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image, base64 `data` with its MIME type (and the URI it came from, when known)."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str
    uri: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcePart:
    """A resource: embedded text (`text` set) or a link the model is told about."""

    type: Literal["resource"] = "resource"
    uri: str
    text: str | None = None
    mime_type: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffContent:
    """An edit a tool made: `old_text` is None when the file was created."""

    type: Literal["diff"] = "diff"
    path: str
    old_text: str | None
    new_text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalContent:
    """A reference to a terminal the client runs (ACP `terminal/create`)."""

    type: Literal["terminal"] = "terminal"
    terminal_id: str


ContentPart = TextPart | ImagePart | ResourcePart
"""What a user or assistant message may hold."""

ToolContent = TextPart | ImagePart | ResourcePart | DiffContent | TerminalContent
"""What a tool result may hold."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """A place in the workspace a tool touches, so an editor can follow along."""

    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call the model asked for; `arguments_json` is the text exactly as streamed."""

    call_id: str
    name: str
    arguments_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolError:
    """Why a tool call failed: a stable `code` and a message that names the remedy."""

    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """One block of a model's extended thinking, sealed so it can be sent back to the model.

    `signature` is the provider's seal over `text`; a redacted block carries only the
    provider's opaque `redacted_data`. Providers that need thinking returned unchanged on
    the next request (Anthropic, with tools) read these from the assistant message.
    """

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One entry of the model's history, as projected from the session log.

    `role="assistant"` messages may carry `tool_calls`; `role="tool"` messages answer
    exactly one call (`tool_call_id`) and `is_error` says whether the call failed.
    """

    id: str
    role: Role
    content: tuple[ToolContent, ...] = ()
    reasoning: str | None = None
    thinking: tuple[ThinkingBlock, ...] = ()
    """Sealed thinking blocks in stream order (only those a provider signed or redacted)."""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """One line of the agent's plan (ACP `plan` entries)."""

    content: str
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"] = "pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionOption:
    """A choice offered when the loop asks whether a tool may run."""

    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A slash command the session offers (ACP `available_commands_update`)."""

    name: str
    description: str
    input_hint: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupt:
    """Why a run stopped to wait for the client (AG-UI `outcome: interrupt`).

    `response_schema_json` is the JSON Schema the answer must follow, as canonical JSON;
    `url` the page a url question asks the person to open (AG-UI `metadata.url`).
    """

    id: str
    reason: str
    tool_call_id: str | None = None
    response_schema_json: str | None = None
    url: str | None = None
