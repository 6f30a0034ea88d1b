"""RunAgentInput → what the runtime needs for one turn: the AG-UI request as a `TurnInput`.

`to_turn(run, known, open_calls)` reads an already validated `RunAgentInput` against what
the server holds for the thread. Messages whose ids the server already has are skipped, so a
client that resends the whole thread (as `HttpAgent` does) adds nothing twice. Of the new
ones: user messages become the turn's input (the last one) or `earlier` messages logged
before it; tool messages answering an open frontend call become `ClientToolResult`s (others
are stale and ignored); assistant, system, developer, reasoning and activity messages are
ignored — the server's log is the record of its own side. `tools` become frontend `Tool`s,
`resume[]` entries `ResumeDecision`s (interrupt id `approval-<call_id>`, payload
`{"approved": bool, "stop"?: bool, "always"?: bool}` — `stop: true` with `approved: false`
rejects the call and ends the turn, stop reason `rejected`; `always: true` keeps the answer
for calls of that kind, as ACP's "always" options do — status `cancelled` = refused) or, for
a question the model asked (`ask_user`, interrupt id `question-<call_id>`), `QuestionReply`s
(payload `{"action": "accept" | "decline" | "cancel", "content"?: {...}}`; status
`cancelled` = cancel), `state` the canonical `state_json`; `forwardedProps.steerable.mode` /
`.config` the settings switched before the turn (`settings_requested`), `.model` the model
route the run switches the thread to (`model_requested`), `.snapshot: false` that the run
sends no MESSAGES_SNAPSHOT (`snapshot_requested`), `.full_requests: true` that its
`model_request`s are sent whole, not by reference (`full_requests_requested`). Mistakes
raise `InputError` (answered with 422). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, ToolMessage, UserMessage

from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.questions import ANSWER_PREFIX, QuestionAnswer
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.turns.turn import (
    ClientToolResult,
    QuestionReply,
    ResumeDecision,
    TurnInput,
)
from steerable_bridge.runtime.values import (
    ContentPart,
    ImagePart,
    ResourcePart,
    TextPart,
    canonical_json,
)

__all__ = [
    "InputError",
    "ParsedRun",
    "Settings",
    "command_requested",
    "content_parts",
    "follow_up_requested",
    "full_requests_requested",
    "model_requested",
    "settings_requested",
    "snapshot_requested",
    "speaks_1_0",
    "steer_requested",
    "to_turn",
]

APPROVAL_PREFIX = "approval-"


class InputError(CodedError):
    """A RunAgentInput the server cannot use; `code` is stable, `message` names the remedy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedRun:
    """One AG-UI run as the runtime sees it."""

    turn: TurnInput
    earlier: tuple[tuple[str, tuple[ContentPart, ...]], ...] = ()
    """New user messages before the last one: (id, content), logged before the turn."""
    new_ids: frozenset[str] = frozenset()
    """Ids of every message this input added (so a resend is recognised)."""


def steer_requested(run: RunAgentInput) -> bool:
    """True when `forwardedProps.steerable.steer` is true."""
    return _own_props(run).get("steer") is True


def follow_up_requested(run: RunAgentInput) -> bool:
    """True when `forwardedProps.steerable.follow_up` is true: queue the new user messages
    for when the running turn would otherwise end."""
    return _own_props(run).get("follow_up") is True


COMMANDS = ("compact",)
"""What `forwardedProps.steerable.command` may name."""


def command_requested(run: RunAgentInput) -> str | None:
    """`forwardedProps.steerable.command` (`"compact"`), None when absent; raises
    `InputError` for a command the server does not know."""
    command = _own_props(run).get("command")
    if command is None:
        return None
    if command not in COMMANDS:
        raise InputError(
            "unknown_command",
            f"forwardedProps.steerable.command {command!r} is not one of: {', '.join(COMMANDS)}",
        )
    return str(command)


@dataclass(frozen=True, slots=True)
class Settings:
    """The mode and config options a request switches before its turn."""

    mode: str | None = None
    options: tuple[tuple[str, str | bool], ...] = ()


def settings_requested(run: RunAgentInput) -> Settings:
    """`forwardedProps.steerable.mode` (a mode id) and `.config` (option id → value: a
    string, or true / false for a boolean option); raises `InputError` for another shape."""
    own = _own_props(run)
    mode = own.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise InputError(
            "invalid_settings", "forwardedProps.steerable.mode must be a mode id (a string)"
        )
    config = own.get("config", {})
    valid = isinstance(config, Mapping) and all(
        isinstance(k, str) and isinstance(v, str | bool) for k, v in config.items()
    )
    if not valid:
        raise InputError(
            "invalid_settings",
            "forwardedProps.steerable.config must map option ids to values (strings, or"
            ' true / false), e.g. {"model": "openai:gpt-4.1"}',
        )
    return Settings(mode=mode, options=tuple(config.items()))


def _own_props(run: RunAgentInput) -> Mapping[str, Any]:
    props = run.forwarded_props
    own = props.get("steerable") if isinstance(props, Mapping) else None
    return own if isinstance(own, Mapping) else {}


def model_requested(run: RunAgentInput) -> str | None:
    """`forwardedProps.steerable.model`: the model route this run switches the thread to
    (None when absent); raises `InputError` for a value that is not a non-empty string."""
    model = _own_props(run).get("model")
    if model is None:
        return None
    if not isinstance(model, str) or not model:
        raise InputError(
            "invalid_model",
            "forwardedProps.steerable.model must be a model route's name; GET"
            " /agent/capabilities lists them in custom.steerable.models",
        )
    return model


def resumable_requested(run: RunAgentInput) -> bool:
    """True when `forwardedProps.steerable.resumable` is true: the client resumes the run's
    stream after a disconnect (`GET /agent/threads/{id}/events`), so leaving does not
    cancel the turn."""
    return _own_props(run).get("resumable") is True


def snapshot_requested(run: RunAgentInput) -> bool:
    """False when `forwardedProps.steerable.snapshot` is false: the client keeps its own
    history (or shows none), so the run ends without a MESSAGES_SNAPSHOT; true when absent
    or true. Raises `InputError` for any other value."""
    snapshot = _own_props(run).get("snapshot", True)
    if not isinstance(snapshot, bool):
        raise InputError(
            "invalid_input",
            "forwardedProps.steerable.snapshot must be true or false (a JSON boolean, not"
            f" {_json_kind(snapshot)}); send false to skip the run's MESSAGES_SNAPSHOT, or"
            " leave it out to get one",
        )
    return snapshot


def full_requests_requested(run: RunAgentInput) -> bool:
    """True when `forwardedProps.steerable.full_requests` is true: every CUSTOM
    `steerable.model_request` of the run holds the whole request, not what changed since the
    thread's previous one (`requests.py`); false when absent or false. Raises `InputError`
    for any other value."""
    full = _own_props(run).get("full_requests", False)
    if not isinstance(full, bool):
        raise InputError(
            "invalid_input",
            "forwardedProps.steerable.full_requests must be true or false (a JSON boolean, not"
            f" {_json_kind(full)}); send true to get each model request whole, or leave it out"
            " to get what changed since the previous one",
        )
    return full


def _json_kind(value: object) -> str:
    """The JSON type of a parsed value, as a client would name it."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"


def stop_requested(run: RunAgentInput) -> bool:
    """True when `forwardedProps.steerable.stop` is true: stop the thread's running turn."""
    props = run.forwarded_props
    if not isinstance(props, Mapping):
        return False
    own = props.get("steerable")
    return isinstance(own, Mapping) and own.get("stop") is True


def speaks_1_0(run: RunAgentInput) -> bool:
    """True when the client declares AG-UI 1.0 or later in `RunAgentInput.protocolVersion`.

    `HttpAgent` from `@ag-ui/client` 1.0 sends `protocolVersion: "1.0"`; the 0.0.x clients
    (CopilotKit 1.75 pins 0.0.59) send no such field and validate RUN_FINISHED's `outcome`
    strictly: only `{type: "success"}` or `interrupt`, nothing extra. A missing or unreadable
    version therefore means "0.0.x" and gets only what those clients accept.
    """
    version = run.protocol_version
    if not isinstance(version, str):
        return False
    major = version.strip().split(".", 1)[0]
    return major.isdigit() and int(major) >= 1


def content_parts(content: str | list[Any]) -> tuple[ContentPart, ...]:
    """AG-UI message content (a string or content parts) as runtime content parts."""
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    parts: list[ContentPart] = []
    for part in content:
        kind = getattr(part, "type", None)
        if kind == "text":
            parts.append(TextPart(text=part.text))
            continue
        source = getattr(part, "source", None)
        if source is None:
            continue
        mime = getattr(source, "mime_type", None)
        if kind == "image" and source.type == "data" and mime:
            parts.append(ImagePart(data=source.value, mime_type=mime))
        elif source.type == "data":
            parts.append(
                ResourcePart(uri=f"data:{mime or ''};base64,{source.value}", mime_type=mime)
            )
        else:
            parts.append(ResourcePart(uri=source.value, mime_type=mime))
    return tuple(parts)


def _tool_text(message: ToolMessage) -> tuple[ContentPart, ...]:
    parts = content_parts(message.content)
    if message.error and not parts:
        return (TextPart(text=message.error),)
    return parts


def _frontend_tools(run: RunAgentInput) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    for tool in run.tools or ():
        parameters = tool.parameters
        if not isinstance(parameters, Mapping):
            parameters = {"type": "object", "properties": {}}
        tools.append(
            Tool(
                name=tool.name,
                description=tool.description,
                parameters=dict(parameters),
                executor="frontend",
            )
        )
    return tuple(tools)


def _resume(
    run: RunAgentInput, open_calls: Container[str]
) -> tuple[list[ResumeDecision], list[QuestionReply]]:
    decisions: list[ResumeDecision] = []
    replies: list[QuestionReply] = []
    for entry in run.resume or ():
        interrupt = entry.interrupt_id
        prefix = ANSWER_PREFIX if interrupt.startswith(ANSWER_PREFIX) else APPROVAL_PREFIX
        call_id = interrupt.removeprefix(prefix)
        asked = prefix == ANSWER_PREFIX and interrupt in open_calls  # a bridged agent's question
        if not interrupt.startswith(prefix) or (call_id not in open_calls and not asked):
            raise InputError(
                "unknown_interrupt",
                f"resume names interrupt {interrupt!r}, which this thread is not"
                " waiting for; answer only the interrupts of the last RUN_FINISHED",
            )
        if prefix == ANSWER_PREFIX:
            replies.append(QuestionReply(question_id=interrupt, answer=_answer(entry)))
            continue
        if entry.status == "cancelled":
            decisions.append(ResumeDecision(call_id=call_id, approved=False))
            continue
        payload = entry.payload
        approved = payload.get("approved") if isinstance(payload, Mapping) else None
        if not isinstance(approved, bool):
            raise InputError(
                "invalid_resume",
                f'resume for {interrupt!r} needs payload {{"approved": true|false}}',
            )
        stop = payload.get("stop", False) if isinstance(payload, Mapping) else False
        if not isinstance(stop, bool):
            raise InputError(
                "invalid_resume",
                f'resume for {interrupt!r}: "stop" must be true or false',
            )
        always = payload.get("always", False) if isinstance(payload, Mapping) else False
        if not isinstance(always, bool):
            raise InputError(
                "invalid_resume",
                f'resume for {entry.interrupt_id!r}: "always" must be true or false',
            )
        decisions.append(
            ResumeDecision(call_id=call_id, approved=approved, stop=stop, always=always)
        )
    return decisions, replies


_ACTIONS = ("accept", "decline", "cancel")


def _answer(entry: Any) -> QuestionAnswer:
    """A question's answer from its resume entry (status `cancelled` = cancel)."""
    if entry.status == "cancelled":
        return QuestionAnswer(action="cancel")
    payload = entry.payload
    action = payload.get("action") if isinstance(payload, Mapping) else None
    if action not in _ACTIONS:
        raise InputError(
            "invalid_resume",
            f"resume for {entry.interrupt_id!r} needs payload"
            ' {"action": "accept" | "decline" | "cancel", "content": {...}}',
        )
    content = payload.get("content") if action == "accept" else None
    if content is not None and not isinstance(content, Mapping):
        raise InputError(
            "invalid_resume",
            f'resume for {entry.interrupt_id!r}: "content" must be an object of the answers',
        )
    return QuestionAnswer(
        action=action, content_json=canonical_json(dict(content)) if content is not None else None
    )


def to_turn(
    run: RunAgentInput, known: set[str] | frozenset[str], open_calls: Container[str]
) -> ParsedRun:
    """The turn this input asks for, given the ids the thread already holds and the ids
    of the tool calls and questions it waits on (`Conversation.open_calls`,
    `.open_questions`)."""
    users: list[tuple[str, tuple[ContentPart, ...]]] = []
    results: list[ClientToolResult] = []
    new_ids: set[str] = set()
    for message in run.messages:
        if message.id in known or message.id in new_ids:
            continue
        new_ids.add(message.id)
        if isinstance(message, UserMessage):
            users.append((message.id, content_parts(message.content)))
        elif isinstance(message, ToolMessage) and message.tool_call_id in open_calls:
            results.append(
                ClientToolResult(
                    call_id=message.tool_call_id,
                    content=_tool_text(message),
                    is_error=bool(message.error),
                )
            )
    last_id, last_content = users[-1] if users else (None, ())
    decisions, replies = _resume(run, open_calls)
    turn = TurnInput(
        content=last_content,
        message_id=last_id,
        tool_results=tuple(results),
        resume=tuple(decisions),
        answers=tuple(replies),
        state_json=canonical_json(run.state) if run.state is not None else None,
        client_tools=_frontend_tools(run),
        compact=command_requested(run) == "compact",
        client_run_id=run.run_id,
        parent_run_id=run.parent_run_id,
    )
    return ParsedRun(turn=turn, earlier=tuple(users[:-1]), new_ids=frozenset(new_ids))
