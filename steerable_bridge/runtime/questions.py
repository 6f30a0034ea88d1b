"""The question port: ask the person something and hand the answer back to whoever asked.

A question is a message plus, in form mode, a JSON schema the answer must follow (a flat
object whose properties are strings, numbers, integers, booleans or string enums — the ACP
elicitation form shape), or, in url mode, a page to open out of band. The model asks
through the `ask_user` tool (`ASK_USER`), which a conversation is offered only when its
transport can get an answer: `Questions(ask=...)` asks at once (ACP `elicitation/create`),
`Questions(ask=None)` defers (the run ends `interrupted` with an interrupt carrying the
schema, and the client's next run answers it — AG-UI `resume[]`). Every answer is one of
accept (with the submitted content), decline or cancel, and the model sees which as the
tool's result (`answer_text`). Plain values and pure helpers; the loop does the asking.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from steerable_bridge.runtime.events import QuestionAction, QuestionMode
from steerable_bridge.runtime.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import canonical_json

__all__ = [
    "ANSWER_PREFIX",
    "ASK_USER",
    "ASK_USER_NAME",
    "QuestionAnswer",
    "QuestionRequest",
    "Questioner",
    "Questions",
    "answer_schema",
    "answer_text",
    "content_problem",
    "form_problem",
    "question_id_for",
]

ASK_USER_NAME = "ask_user"
ANSWER_PREFIX = "question-"
"""Interrupt / question ids of `ask_user` calls: `question-<call_id>`."""

_PRIMITIVES = ("string", "number", "integer", "boolean")

_FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"enum": list(_PRIMITIVES)},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "enum": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "default": {"type": ["string", "number", "boolean"]},
    },
    "required": ["type"],
    "additionalProperties": False,
}

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "minLength": 1,
            "description": "What you need from the person and why, in one or two sentences.",
        },
        "schema": {
            "type": "object",
            "description": (
                "The form to show: a JSON schema of type object whose properties are flat"
                " fields of type string (optionally with enum choices), number, integer or"
                " boolean. Never ask for passwords, API keys or other secrets."
            ),
            "properties": {
                "type": {"const": "object"},
                "title": {"type": "string"},
                "description": {"type": "string"},
                "properties": {
                    "type": "object",
                    "additionalProperties": _FIELD_SCHEMA,
                    "minProperties": 1,
                },
                "required": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["type", "properties"],
            "additionalProperties": False,
        },
    },
    "required": ["message", "schema"],
    "additionalProperties": False,
}


async def _asked_by_the_loop(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    raise ToolFailure("not_asked", "ask_user is answered by the loop, never run as a handler")


ASK_USER = Tool(
    name=ASK_USER_NAME,
    description=(
        "Ask the person a question and wait for the answer, as a small form. Use it when you"
        " cannot go on without a choice or a fact only they know. The result says whether"
        " they accepted (with their answers), declined or cancelled."
    ),
    parameters=_PARAMETERS,
    kind="think",
    handler=_asked_by_the_loop,
    timeout_s=3600.0,
)
"""The model's way to ask the person (offered only when the conversation can get answers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionRequest:
    """A question waiting for the person."""

    session_id: str
    question_id: str
    message: str
    mode: QuestionMode = "form"
    schema_json: str | None = None
    """Canonical JSON of the form's schema (form mode)."""
    url: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAnswer:
    """What the person did; `content_json` is the submitted form (accept only)."""

    action: QuestionAction
    content_json: str | None = None


Questioner = Callable[[QuestionRequest], Awaitable[QuestionAnswer]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Questions:
    """How a conversation gets answers: `ask` asks at once; None defers to the next run."""

    ask: Questioner | None = None


def question_id_for(call_id: str) -> str:
    """The question (and AG-UI interrupt) id of an `ask_user` call."""
    return f"{ANSWER_PREFIX}{call_id}"


def form_problem(schema: object) -> str | None:
    """Why `schema` is not an elicitation form (a flat object of primitive properties), or
    None when it is one."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return 'the schema must be {"type": "object", "properties": {...}}'
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "the schema needs an object of properties"
    for name, field in properties.items():
        kind = field.get("type") if isinstance(field, Mapping) else None
        if kind not in (*_PRIMITIVES, "array"):
            return f"property {name!r} must be a string, number, integer or boolean field"
        if kind == "array":
            items = field.get("items")
            if not isinstance(items, Mapping) or items.get("type") != "string":
                return f"property {name!r}: a multi-select needs string items"
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        return "every name in required must be one of the properties"
    return None


_VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def content_problem(schema_json: str | None, content_json: str | None) -> str | None:
    """Why submitted content does not follow the form (the agent validates again, as the
    spec asks), or None when it does."""
    if schema_json is None or content_json is None:
        return None
    schema, content = json.loads(schema_json), json.loads(content_json)
    if not isinstance(content, dict):
        return "the answer is not an object"
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in content:
            return f"{name!r} is required but missing"
    for name, value in content.items():
        field = properties.get(name)
        if not isinstance(field, Mapping):
            return f"{name!r} is not a field of the form"
        kind = field.get("type")
        if kind == "array":
            fits = isinstance(value, list) and all(isinstance(v, str) for v in value)
        else:
            types = _VALUE_TYPES.get(str(kind), ())
            fits = isinstance(value, types) and (kind == "boolean" or not isinstance(value, bool))
        if not fits:
            return f"{name!r} should be of type {kind}"
        choices = field.get("enum")
        if isinstance(choices, list) and kind != "array" and value not in choices:
            return f"{name!r} must be one of {choices}"
    return None


def answer_schema(schema_json: str | None) -> str:
    """The JSON schema of an answer to a question (AG-UI `resume[].payload`): the action,
    and on accept the content following the question's own schema."""
    content: Any = json.loads(schema_json) if schema_json is not None else {"type": "object"}
    return canonical_json(
        {
            "type": "object",
            "properties": {
                "action": {"enum": ["accept", "decline", "cancel"]},
                "content": content,
            },
            "required": ["action"],
        }
    )


def answer_text(
    answer: QuestionAnswer, *, timed_out: float | None = None, problem: str | None = None
) -> str:
    """The tool result the model reads for an answer (`problem`: how the submitted content
    strays from the form)."""
    if timed_out is not None:
        return f"nobody answered the question within {timed_out:g}s; go on without it"
    if answer.action == "accept":
        content = answer.content_json or "{}"
        text = f'{{"action":"accept","content":{content}}}'
        return f"{text} (the answer does not follow the form: {problem})" if problem else text
    if answer.action == "decline":
        return '{"action":"decline"} (the person declined to answer; do not ask again)'
    return '{"action":"cancel"} (the person dismissed the question without answering)'
