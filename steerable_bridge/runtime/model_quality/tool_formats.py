"""Parsers for the tool-call formats models write as text, one small function per format.

`parse_markup(markup)` turns a candidate the stripper (`tool_text.py`) found into the calls
it names, as `TextCall(name, arguments, loose)`, or None when the text is not a well-formed
call of its format. `loose` marks formats whose argument values arrive as bare strings
(MiniMax `<parameter>`, `<parameter=...>` tags, GLM `<arg_value>`): the caller may read such
a value as JSON when the tool's schema wants a number, a boolean or an object. A bare value
keeps its indentation and inner newlines; only the one newline the format puts after the
opening tag and before the closing tag goes. Nothing here knows which tools exist;
`pseudo_calls.py` checks names and arguments. Pythonic calls are read with `ast` (literals
only, plus JSON's `true` / `false` / `null`: nothing is evaluated).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steerable_bridge.runtime.model_quality.tool_markers import (
    DS_CALL_BEGIN,
    DS_CALL_END,
    DS_CALLS_BEGIN,
    DS_CALLS_END,
    DS_CALLS_R1,
    DS_SEP,
)
from steerable_bridge.runtime.model_quality.tool_text import Markup

__all__ = ["TextCall", "parse_markup"]


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call read from text: the tool name and its arguments."""

    name: str
    arguments: dict[str, Any]
    loose: bool = False


Calls = list[TextCall] | None

_DECODER = json.JSONDecoder()
_SEPARATORS = " \t\r\n,;"


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_values(text: str) -> list[Any] | None:
    """JSON values one after another, apart by whitespace, `,` or `;` (None: not that)."""
    values: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _SEPARATORS:
            i += 1
        if i == n:
            return values or None
        try:
            value, i = _DECODER.raw_decode(text, i)
        except ValueError:
            return None
        values.append(value)


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


def _calls(values: list[Any] | None) -> Calls:
    """Calls from JSON values: each an object of a call or a list of them."""
    if not values:
        return None
    items = [item for value in values for item in (value if isinstance(value, list) else [value])]
    calls = [_object_call(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _bare(value: str) -> str:
    """A bare value without the one newline after its opening and before its closing tag."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _between(raw: str, opener: str, closer: str) -> str:
    body = raw[len(opener) :] if raw.startswith(opener) else raw
    return body[: -len(closer)] if body.endswith(closer) else body


# -- tags around JSON or parameters ---------------------------------------------------------

_WRAPPER = re.compile(r"<([\w:]+)>(.*?)(</\1>)?\Z", re.S)
_GLM_NAME = re.compile(r"([^\s<>]+)\s*")
_GLM_ARG = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def _hermes(raw: str) -> Calls:
    """`<tool_call>` (and `<tool>`, `<tools>`, `<JSON>`, `<response>`...) around JSON, one or
    more objects; Qwen3-Coder `<function=...>` or GLM-4.5 `NAME<arg_key>...` inside."""
    m = _WRAPPER.match(raw)
    if m is None:
        return None
    body = m.group(2).strip()
    if body[:1] in ("{", "["):  # JSON ends itself: a missing closing tag is forgiven
        return _calls(_json_values(body))
    if m.group(3) is None:  # tags without their closing tag may have been cut short
        return None
    if body.startswith("<function"):
        return _functions(body)
    return _glm(body) if m.group(1) == "tool_call" else None


def _glm(body: str) -> Calls:
    m = _GLM_NAME.match(body)
    if m is None:
        return None
    args: dict[str, Any] = {}
    pos = m.end()
    for arg in _GLM_ARG.finditer(body, pos):
        if arg.start() != pos:
            return None
        args[arg.group(1).strip()] = _bare(arg.group(2))
        pos = arg.end()
    if body[pos:].strip():
        return None
    return [TextCall(m.group(1), args, loose=True)]


_FUNCTION = re.compile(
    r"\s*<function(?:=([^>\s]+)|\s+name=\"([^\"]+)\")>(.*?)(?:</function>|\Z)\s*", re.S
)
_PARAM_TAG = re.compile(r"\s*<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)


def _functions(body: str) -> Calls:
    """One or more `<function=NAME>` (or `<function name="NAME">`) blocks and nothing else."""
    calls: list[TextCall] = []
    pos = 0
    while pos < len(body):
        m = _FUNCTION.match(body, pos)
        if m is None or m.end() == pos:
            return None
        call = _function_body(m.group(1) or m.group(2), m.group(3))
        if call is None:
            return None
        calls.append(call)
        pos = m.end()
    return calls or None


def _function_body(name: str, body: str) -> TextCall | None:
    stripped = body.strip()
    if not stripped:
        return TextCall(name, {})
    if stripped.startswith("<parameter="):
        args: dict[str, Any] = {}
        pos = 0
        while pos < len(body) and body[pos:].strip():
            m = _PARAM_TAG.match(body, pos)
            if m is None:
                return None
            args[m.group(1)] = _bare(m.group(2))
            pos = m.end()
        return TextCall(name, args, loose=True)
    args_value = _json(stripped)
    return TextCall(name, args_value) if isinstance(args_value, dict) else None


def _function_tag(raw: str) -> Calls:
    return _functions(raw)


def _seed_oss(raw: str) -> Calls:
    return _functions(_between(raw, "<seed:tool_call>", "</seed:tool_call>").strip())


def _tool_calls(raw: str) -> Calls:
    """MiniMax-M1 (objects one a line) and Jamba (a list) inside `<tool_calls>`."""
    return _calls(_json_values(_between(raw, "<tool_calls>", "</tool_calls>")))


_INVOKE = re.compile(r"<invoke name=[\"']([^\"']+)[\"']\s*>(.*?)</invoke>", re.S)
_PARAMETER = re.compile(r"<parameter name=[\"']([^\"']+)[\"']\s*>(.*?)</parameter>", re.S)


def _minimax(raw: str) -> Calls:
    calls: list[TextCall] = []
    for name, body in _INVOKE.findall(raw):
        params = _PARAMETER.findall(body)
        if _PARAMETER.sub("", body).strip():
            return None
        calls.append(TextCall(name, {k: _bare(v) for k, v in params}, loose=True))
    leftover = _INVOKE.sub("", raw).replace("<minimax:tool_call>", "")
    leftover = leftover.replace("</minimax:tool_call>", "")
    return calls if calls and not leftover.strip() else None


# -- special tokens ------------------------------------------------------------------------

_DS_CALL = re.compile(
    re.escape(DS_CALL_BEGIN) + "(.*?)" + re.escape(DS_SEP) + "(.*?)" + re.escape(DS_CALL_END), re.S
)
_FENCED = re.compile(r"\A\s*(`{3,})[\w-]*[ \t]*\n(.*?)\n?(?:\1`*\s*)?\Z", re.S)


def _deepseek(raw: str) -> Calls:
    calls: list[TextCall] = []
    for head, tail in _DS_CALL.findall(raw):
        head = head.strip()
        if head == "function":  # V3 / R1: function<sep>NAME\n```json\n{...}\n```
            name, _, rest = tail.partition("\n")
            fenced = _FENCED.match(rest)
            args = _json(fenced.group(2) if fenced else rest)
        else:  # V3.1: NAME<sep>{...}
            name, args = head, _json(tail)
        if not name.strip() or not isinstance(args, dict):
            return None
        calls.append(TextCall(name.strip(), args))
    leftover = _DS_CALL.sub("", raw)
    for token in (DS_CALLS_BEGIN, DS_CALLS_R1, DS_CALLS_END):
        leftover = leftover.replace(token, "")
    return calls if calls and not leftover.strip() else None


_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*([^<]+?)\s*<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>",
    re.S,
)
_KIMI_SECTION = re.compile(r"<\|tool_calls?_section_(?:begin|end)\|>")


def _kimi(raw: str) -> Calls:
    """`functions.NAME:0<|tool_call_argument_begin|>{...}`, the id's middle is the name."""
    calls: list[TextCall] = []
    for ident, body in _KIMI_CALL.findall(raw):
        name = ident.split(":", 1)[0]
        name = name.removeprefix("functions.")
        args = _json(body)
        if not name or not isinstance(args, dict):
            return None
        calls.append(TextCall(name, args))
    leftover = _KIMI_SECTION.sub("", _KIMI_CALL.sub("", raw))
    return calls if calls and not leftover.strip() else None


def _internlm(raw: str) -> Calls:
    body = _between(raw, "<|action_start|><|plugin|>", "<|action_end|>")
    return _calls(_json_values(body))


def _granite(raw: str) -> Calls:
    return _calls(_json_values(raw[len("<|tool_call|>") :]))


def _llama4(raw: str) -> Calls:
    return _pythonic(_between(raw, "<|python_start|>", "<|python_end|>").strip())


_BUILTIN = re.compile(r"([\w\-]+)\.call\((.*)\)\s*\Z", re.S)


def _python_tag(raw: str) -> Calls:
    """JSON objects joined by `;`, or a built-in tool's `NAME.call(a="...")` (Llama 3.1)."""
    body = raw[len("<|python_tag|>") :].strip()
    m = _BUILTIN.match(body)
    if m is not None:
        calls = _pythonic(f"[f({m.group(2)})]")
        return [TextCall(m.group(1), calls[0].arguments)] if calls else None
    return _calls(_json_values(body))


_HARMONY = re.compile(r"to=(?:functions\.)?([^\s<]+)")


def _harmony(raw: str) -> Calls:
    """`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`."""
    header, sep, body = raw.partition("<|message|>")
    m = _HARMONY.search(header)
    if not sep or m is None:
        return None
    args = _json(body.removesuffix("<|call|>").strip())
    return [TextCall(m.group(1), args)] if isinstance(args, dict) else None


# -- brackets ------------------------------------------------------------------------------

_MISTRAL_NAMED = re.compile(r"([^\s\[{]+)(?:\[CALL_ID\][^\[]*)?(?:\[ARGS\])?(\{.*)\Z", re.S)


def _mistral(raw: str) -> Calls:
    body = raw[len("[TOOL_CALLS]") :].strip()
    if body[:1] in "[{":
        return _calls(_json_values(body))
    m = _MISTRAL_NAMED.match(body)
    if m is None:
        return None
    args = _json(m.group(2))
    return [TextCall(m.group(1), args)] if isinstance(args, dict) else None


def _functionary(raw: str) -> Calls:
    name, _, body = raw[len(">>>") :].partition("\n")
    args = _json(body.strip())
    return [TextCall(name, args)] if name and isinstance(args, dict) else None


def _functools(raw: str) -> Calls:
    return _calls(_json_values(raw.strip()[len("functools") :]))


def _bare_json(raw: str) -> Calls:
    return _calls(_json_values(raw))


_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False}


def _literal(node: ast.expr) -> Any:
    """A literal argument value: Python's or JSON's constants, lists, dicts, negatives."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise ValueError("not a JSON value")
    if isinstance(node, ast.Name) and (node.id in _JSON_NAMES or node.id == "None"):
        return _JSON_NAMES.get(node.id)
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(element) for element in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            name = _literal(key) if key is not None else None
            if not isinstance(name, str):
                raise ValueError("not a JSON object key")
            out[name] = _literal(item)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("not a literal")


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


def _pythonic(raw: str) -> Calls:
    """`[fn(a=1), other(b="x")]`, or a JSON list of call objects."""
    text = raw.strip()
    if text.startswith("[") and text[1:].lstrip().startswith("{"):
        return _calls(_json_values(text))
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls = [_py_call(element) for element in tree.elts]
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


def _olmo(raw: str) -> Calls:
    """OLMo-3: pythonic calls, one a line, inside `<function_calls>`."""
    body = _between(raw, "<function_calls>", "</function_calls>").strip()
    try:
        module = ast.parse(body, mode="exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    calls: list[TextCall] = []
    for statement in module.body:
        if not isinstance(statement, ast.Expr):
            return None
        call = _py_call(statement.value)
        if call is None:
            return None
        calls.append(call)
    return calls or None


def _fenced_json(raw: str) -> Calls:
    m = _FENCED.match(raw)
    if m is None:
        return None
    body = m.group(2).strip()
    return _pythonic(body) if body.startswith("[") else _bare_json(body)


_MARKDOWN = re.compile(r"\[Tool call:\s*([^\s(]+)\s*\((.*)\)\s*\]\Z", re.S)


def _markdown(raw: str) -> Calls:
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


_PARSERS: dict[str, Callable[[str], Calls]] = {
    "hermes": _hermes,
    "function_tag": _function_tag,
    "seed_oss": _seed_oss,
    "tool_calls": _tool_calls,
    "minimax": _minimax,
    "olmo": _olmo,
    "deepseek": _deepseek,
    "kimi": _kimi,
    "internlm": _internlm,
    "granite": _granite,
    "llama4": _llama4,
    "python_tag": _python_tag,
    "harmony": _harmony,
    "mistral": _mistral,
    "functionary": _functionary,
    "functools": _functools,
    "markdown": _markdown,
    "pythonic": _pythonic,
    "bare_json": _bare_json,
    "fenced_json": _fenced_json,
}


def parse_markup(markup: Markup) -> Calls:
    """The calls a candidate names, or None when it is not a well-formed call."""
    parser = _PARSERS.get(markup.format)
    if parser is None:
        return None
    try:
        return parser(markup.raw.strip())
    except (ValueError, TypeError, RecursionError):
        return None
