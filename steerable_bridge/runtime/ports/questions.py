"""The question port: ask the person something and hand the answer back to whoever asked.

A question is a message plus, in form mode, a JSON schema the answer must follow (a flat
object whose properties are strings, numbers, integers, booleans or string enums — the ACP
elicitation form shape), or, in url mode, an http(s) page the person opens out of band (a
sign-in or consent page, a document to read) and confirms. The model asks through the
`ask_user` tool (`ASK_USER`: `message` plus `schema` or `url`), which a conversation is
offered only when its transport can get an answer: `Questions(ask=...)` asks at once (ACP
`elicitation/create`), `Questions(ask=None)` defers (the run ends `interrupted` with an
interrupt carrying the schema or the url, and the client's next run answers it — AG-UI
`resume[]`). `Questions.modes` says which modes the person's client can show; a url
question to a client without url mode falls back to a form with one yes/no field
(`CONFIRM_SCHEMA`) and the page in the message. Every answer is one of accept (with the
submitted content; for a url question: the person opened the page), decline or cancel, and
the model sees which as the tool's result (`answer_text`). Plain values and pure helpers;
the loop does the asking.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from steerable_bridge.runtime.events import QuestionAction, QuestionMode
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import canonical_json

__all__ = [
    "ANSWER_PREFIX",
    "ASK_USER",
    "ASK_USER_NAME",
    "CONFIRM_SCHEMA",
    "QUESTION_MODES",
    "QuestionAnswer",
    "QuestionRequest",
    "Questioner",
    "Questions",
    "answer_schema",
    "answer_text",
    "content_problem",
    "form_problem",
    "question_id_for",
    "url_problem",
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
        "url": {
            "type": "string",
            "description": (
                "Instead of a schema: an http(s) page the person should open and come back"
                " from, such as a sign-in or consent page or a document to read. Anything"
                " secret is typed there, never into this conversation."
            ),
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}

CONFIRM_SCHEMA: str = canonical_json(
    {
        "type": "object",
        "properties": {
            "done": {
                "type": "boolean",
                "title": "I opened the page and I am done there",
            }
        },
        "required": ["done"],
    }
)
"""The form a url question becomes for a client that shows forms but not urls."""

QUESTION_MODES: frozenset[QuestionMode] = frozenset({"form", "url"})


async def _asked_by_the_loop(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    raise ToolFailure("not_asked", "ask_user is answered by the loop, never run as a handler")


ASK_USER = Tool(
    name=ASK_USER_NAME,
    description=(
        "Ask the person a question and wait for the answer: a small form (`schema`), or a"
        " page for them to open and come back from (`url`: a sign-in or consent page, a"
        " document). Use it when you cannot go on without a choice, a fact or a step only"
        " they can give or take. The result says whether they accepted (with their answers"
        " / having opened the page), declined or cancelled."
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
    """How a conversation gets answers: `ask` asks at once; None defers to the next run.
    `modes`: what the person's client can show (a url question falls back to a form)."""

    ask: Questioner | None = None
    modes: frozenset[QuestionMode] = QUESTION_MODES


def question_id_for(call_id: str) -> str:
    """The question (and AG-UI interrupt) id of an `ask_user` call."""
    return f"{ANSWER_PREFIX}{call_id}"


def url_problem(url: object) -> str | None:
    """Why `url` is not a page a person can be sent to (an absolute http or https URL with
    a host, no credentials in it), or None when it is one."""
    if not isinstance(url, str) or not url.strip():
        return "the url must be a non-empty string"
    try:
        parts = urlsplit(url)
    except ValueError as error:
        return f"the url does not parse: {error}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the url must be an absolute http:// or https:// address"
    if parts.username is not None or parts.password is not None:
        return "the url must not carry a user name or password"
    if any(c.isspace() for c in url):
        return "the url must not contain spaces"
    return None


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


def answer_schema(schema_json: str | None, *, url: bool = False) -> str:
    """The JSON schema of an answer to a question (AG-UI `resume[].payload`): the action,
    and on accept the content following the question's own schema (a url question has
    none: accept means the person opened the page)."""
    action = {"enum": ["accept", "decline", "cancel"]}
    if url:
        properties: dict[str, Any] = {"action": action}
    else:
        content: Any = json.loads(schema_json) if schema_json is not None else {"type": "object"}
        properties = {"action": action, "content": content}
    return canonical_json({"type": "object", "properties": properties, "required": ["action"]})


def answer_text(
    answer: QuestionAnswer,
    *,
    timed_out: float | None = None,
    problem: str | None = None,
    url: str | None = None,
) -> str:
    """The tool result the model reads for an answer (`problem`: how the submitted content
    strays from the form; `url`: the page of a url question)."""
    if timed_out is not None:
        return f"nobody answered the question within {timed_out:g}s; go on without it"
    if url is not None and answer.action == "accept":
        return f'{{"action":"accept"}} (the person opened {url} and is done there)'
    if answer.action == "accept":
        content = answer.content_json or "{}"
        text = f'{{"action":"accept","content":{content}}}'
        return f"{text} (the answer does not follow the form: {problem})" if problem else text
    if answer.action == "decline":
        return '{"action":"decline"} (the person declined to answer; do not ask again)'
    return '{"action":"cancel"} (the person dismissed the question without answering)'
