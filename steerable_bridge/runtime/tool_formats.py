"""Parsers for the tool-call formats models write as text, one function per format.

`parse_markup(markup)` turns a candidate the stripper (`tool_text.py`) found into the calls
it names, as `TextCall(name, arguments, loose)`, or None when the text is not a well-formed
call of its format. `loose` marks formats whose argument values arrive as bare strings
(MiniMax `<parameter>`, `<parameter=...>` tags): the caller may read such a value as JSON
when the tool's schema wants a number, a boolean or an object. Nothing here knows which
tools exist; `pseudo_calls.py` checks names and arguments. Pythonic calls are read with
`ast` (literals only: nothing is evaluated).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steerable_bridge.runtime.tool_text import (
    DS_CALL_BEGIN,
    DS_CALL_END,
    DS_CALLS_BEGIN,
    DS_CALLS_END,
    DS_SEP,
    Markup,
)

__all__ = ["TextCall", "parse_markup"]


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call read from text: the tool name and its arguments."""

    name: str
    arguments: dict[str, Any]
    loose: bool = False


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _object_call(value: Any) -> TextCall | None:
    """`{"name": ..., "arguments" | "parameters": {...} or "{...}"}` (or under `function`)."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]
    name = value.get("name", value.get("tool_name", value.get("tool")))
    if not isinstance(name, str) or not name:
        return None
    args: Any = value.get("arguments", value.get("parameters", value.get("args", {})))
    if isinstance(args, str):
        args = _json(args) if args.strip() else {}
    if not isinstance(args, dict):
        return None
    extra = set(value) - {"name", "tool_name", "tool", "arguments", "parameters", "args"}
    if extra - {"type", "id", "function"}:
        return None
    return TextCall(name, args)


def _calls(value: Any) -> list[TextCall] | None:
    items = value if isinstance(value, list) else [value]
    calls = [_object_call(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _hermes(raw: str) -> list[TextCall] | None:
    body = (
        raw[len("<tool_call>") : -len("</tool_call>")] if raw.endswith("</tool_call>") else raw[11:]
    )
    return _calls(_json(body.strip()))


_PARAM_TAG = re.compile(r"<parameter=([\w.\-]+)>(.*?)</parameter>", re.S)


def _function_tag(raw: str) -> list[TextCall] | None:
    m = re.match(r"<function=([\w.\-]+)>(.*?)(?:</function>)?\s*\Z", raw, re.S)
    if m is None:
        return None
    name, body = m.group(1), m.group(2).strip()
    if not body:
        return [TextCall(name, {})]
    if body.startswith("<parameter="):
        params = _PARAM_TAG.findall(body)
        if not params or _PARAM_TAG.sub("", body).strip():
            return None
        return [TextCall(name, {k: v.strip("\n") for k, v in params}, loose=True)]
    args = _json(body)
    return [TextCall(name, args)] if isinstance(args, dict) else None


_DS_CALL = re.compile(
    re.escape(DS_CALL_BEGIN) + "(.*?)" + re.escape(DS_SEP) + "(.*?)" + re.escape(DS_CALL_END), re.S
)
_FENCED = re.compile(r"\A\s*```[\w-]*\s*\n(.*?)\n?```\s*\Z", re.S)


def _deepseek(raw: str) -> list[TextCall] | None:
    calls: list[TextCall] = []
    for head, tail in _DS_CALL.findall(raw):
        head = head.strip()
        if head == "function":  # V3: function<sep>NAME\n```json\n{...}\n```
            name, _, rest = tail.partition("\n")
            fenced = _FENCED.match(rest)
            args = _json(fenced.group(1) if fenced else rest)
        else:  # V3.1: NAME<sep>{...}
            name, args = head, _json(tail)
        if not name.strip() or not isinstance(args, dict):
            return None
        calls.append(TextCall(name.strip(), args))
    leftover = _DS_CALL.sub("", raw)
    for token in (DS_CALLS_BEGIN, DS_CALLS_END):
        leftover = leftover.replace(token, "")
    return calls if calls and not leftover.strip() else None


_INVOKE = re.compile(r"<invoke name=[\"']([^\"']+)[\"']\s*>(.*?)</invoke>", re.S)
_PARAMETER = re.compile(r"<parameter name=[\"']([^\"']+)[\"']\s*>(.*?)</parameter>", re.S)


def _minimax(raw: str) -> list[TextCall] | None:
    calls: list[TextCall] = []
    for name, body in _INVOKE.findall(raw):
        params = _PARAMETER.findall(body)
        if _PARAMETER.sub("", body).strip():
            return None
        calls.append(TextCall(name, {k: v.strip("\n") for k, v in params}, loose=True))
    leftover = _INVOKE.sub("", raw).replace("<minimax:tool_call>", "")
    leftover = leftover.replace("</minimax:tool_call>", "")
    return calls if calls and not leftover.strip() else None


def _mistral(raw: str) -> list[TextCall] | None:
    body = raw[len("[TOOL_CALLS]") :].strip()
    if body[:1] in "[{":
        return _calls(_json(body))
    m = re.match(r"([\w.\-]+)\[ARGS\](.*)\Z", body, re.S)
    if m is None:
        return None
    args = _json(m.group(2))
    return [TextCall(m.group(1), args)] if isinstance(args, dict) else None


def _python_tag(raw: str) -> list[TextCall] | None:
    return _calls(_json(raw[len("<|python_tag|>") :].strip()))


def _bare_json(raw: str) -> list[TextCall] | None:
    return _calls(_json(raw.strip()))


def _literal(node: ast.expr) -> Any:
    value = ast.literal_eval(node)
    json.dumps(value)  # only JSON-shaped values are arguments
    return value


def _py_call(node: ast.expr) -> TextCall | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.append(func.id)
    args: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        args[keyword.arg] = _literal(keyword.value)
    return TextCall(".".join(reversed(parts)), args)


def _pythonic(raw: str) -> list[TextCall] | None:
    text = raw.strip()
    if text.startswith("[") and text[1:].lstrip().startswith("{"):
        return _calls(_json(text))
    try:
        tree = ast.parse(text, mode="eval").body
        if not isinstance(tree, ast.List) or not tree.elts:
            return None
        calls = [_py_call(element) for element in tree.elts]
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


def _fenced_json(raw: str) -> list[TextCall] | None:
    m = _FENCED.match(raw)
    if m is None:
        return None
    body = m.group(1).strip()
    return _pythonic(body) if body.startswith("[") else _bare_json(body)


_MARKDOWN = re.compile(r"\[Tool call:\s*([\w.\-]+)\s*\((.*)\)\s*\]\Z", re.S)


def _markdown(raw: str) -> list[TextCall] | None:
    m = _MARKDOWN.match(raw)
    if m is None:
        return None
    name, inner = m.group(1), m.group(2).strip()
    if not inner:
        return [TextCall(name, {})]
    if inner.startswith("{"):
        args = _json(inner)
        return [TextCall(name, args)] if isinstance(args, dict) else None
    calls = _pythonic(f"[f({inner})]")
    return [TextCall(name, calls[0].arguments)] if calls else None


_PARSERS: dict[str, Callable[[str], list[TextCall] | None]] = {
    "hermes": _hermes,
    "function_tag": _function_tag,
    "deepseek": _deepseek,
    "minimax": _minimax,
    "mistral": _mistral,
    "python_tag": _python_tag,
    "bare_json": _bare_json,
    "pythonic": _pythonic,
    "fenced_json": _fenced_json,
    "markdown": _markdown,
}


def parse_markup(markup: Markup) -> list[TextCall] | None:
    """The calls a candidate names, or None when it is not a well-formed call."""
    parser = _PARSERS.get(markup.format)
    if parser is None:
        return None
    try:
        return parser(markup.raw)
    except (ValueError, TypeError, RecursionError):
        return None
