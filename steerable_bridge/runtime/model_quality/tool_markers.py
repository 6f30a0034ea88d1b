"""The markers of every text tool-call and reasoning format, as one declarative table.

Each `Marker` says how a piece of model text starts (`text`), what it is (`kind`: a call
`candidate`, a `think` block routed to reasoning, a `frame` token dropped from the answer,
or a gpt-oss harmony `header` decided when its `<|message|>` arrives), how to tell early
whether it really is one (`viable`: True, False, or None for "cannot tell yet"), and where
it ends (an end tag, or the bracket that balances the one it opens). The streaming stripper
(`tool_text.py`) reads only this table, so adding a format is one entry here plus its parser
in `tool_formats.py`. Nothing here decides whether a call is valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BY_FIRST",
    "BY_TWO",
    "CALL_KEYS",
    "DS_CALLS_BEGIN",
    "DS_CALLS_END",
    "DS_CALLS_R1",
    "DS_CALL_BEGIN",
    "DS_CALL_END",
    "DS_SEP",
    "FENCE_LANGS",
    "HARMONY_ANALYSIS",
    "HARMONY_CALL",
    "MARKERS",
    "SINGLE",
    "START_MARKERS",
    "Marker",
    "key_viable",
    "list_viable",
    "may_open",
]


def _ds(word: str) -> str:
    """A DeepSeek special token: full-width bars around words joined by U+2581."""
    return "<\uff5c" + word.replace(" ", "\u2581") + "\uff5c>"


DS_CALLS_BEGIN = _ds("tool calls begin")
DS_CALLS_END = _ds("tool calls end")
DS_CALLS_R1 = _ds("tool calls")
DS_CALL_BEGIN = _ds("tool call begin")
DS_CALL_END = _ds("tool call end")
DS_SEP = _ds("tool sep")

Viable = Callable[[str], bool | None]
Kind = Literal["candidate", "think", "frame", "header"]

_NAME = re.compile(r"[\w.\-]*")
CALL_KEYS = ("name", "function", "tool", "tool_name", "arguments", "parameters", "type", "id")
FENCE_LANGS = frozenset({"", "json", "tool_call", "tool_code", "python", "py"})


@dataclass(frozen=True, slots=True)
class Marker:
    """How one format's markup starts and ends; see the module docstring."""

    text: str
    format: str
    kind: Kind = "candidate"
    viable: Viable | None = None
    """What follows `text`: True is markup, False is not, None cannot tell yet."""
    end_tag: str | None = None
    """The candidate ends after this tag; None: after the balanced bracket that follows."""
    from_opener: bool = False
    """Balance from the marker's own bracket (`[Tool call: ...]`, `[fn(...)]`, `{...}`)."""
    body_at: Callable[[str], int | None] | None = None
    """Where the balanced part starts in the candidate (None: not known yet)."""
    chain: bool = False
    """Several balanced parts joined by `;` (Llama 3.1) make one candidate."""
    close: tuple[str, ...] = ()
    """`think`: the tags that end the block (consumed)."""
    stops: tuple[str, ...] = ()
    """`think`: markers that end the block without being part of it (harmony)."""


def _json_start(rest: str) -> bool | None:
    rest = rest.lstrip()
    return None if not rest else rest[0] in "{["


def _name_then(close: str, *, spaced: bool = False) -> Viable:
    """A name, then `close` (`<function=NAME>`, `[Tool call: NAME(`)."""

    def viable(rest: str) -> bool | None:
        rest = rest.lstrip() if spaced else rest
        m = _NAME.match(rest)
        end = m.end() if m else 0
        if end == len(rest):
            return None
        tail = rest[end:].lstrip() if spaced else rest[end:]
        if not tail:
            return None
        return end > 0 and tail[0] == close

    return viable


def _quoted(rest: str) -> bool | None:
    return None if not rest else rest[0] in "\"'"


def key_viable(text: str) -> bool | None:
    """After `{`: is the first key one a call object starts with?"""
    rest = text.lstrip()
    if not rest:
        return None
    if rest[0] != '"':
        return False
    close = rest.find('"', 1)
    key = rest[1:] if close < 0 else rest[1:close]
    if close < 0:
        return None if any(k.startswith(key) for k in CALL_KEYS) else False
    return key in CALL_KEYS


_PY_HEAD = re.compile(r"\s*([A-Za-z_][\w.]*)?\s*(\()?")


def list_viable(rest: str) -> bool | None:
    """After `[`: a JSON call object or `name(` of a pythonic call."""
    stripped = rest.lstrip()
    if not stripped:
        return None
    if stripped[0] == "{":
        return key_viable(stripped[1:])
    m = _PY_HEAD.match(rest)
    if m is None or m.group(1) is None:
        return False
    if m.group(2):
        return True
    return None if m.end() == len(rest) else False


def _tool_call(rest: str) -> bool | None:
    """`<tool_call>` then JSON (Hermes), `<function=` (Qwen3-Coder) or a name (GLM-4.5)."""
    stripped = rest.lstrip()
    if not stripped:
        return None
    if stripped[0] in "{[":
        return True
    if stripped[0] == "<":
        head = stripped[: len("<function=")]
        return None if "<function=".startswith(head) and len(head) < 10 else head == "<function="
    m = _NAME.match(rest)
    end = m.end() if m else 0
    if end == 0:
        return False
    tail = rest[end:]
    if not tail:
        return None
    if tail[0] in "\r\n":
        return True
    for tag in ("<arg_key>", "</tool_call>"):  # GLM: NAME<arg_key>... or NAME</tool_call>
        if tag.startswith(tail[: len(tag)]):
            return None if len(tail) < len(tag) else True
    return False


def _python_tag(rest: str) -> bool | None:
    """`<|python_tag|>` then JSON, or `NAME.call(` (Llama 3.1 built-in tools)."""
    stripped = rest.lstrip()
    if not stripped:
        return None
    if stripped[0] in "{[":
        return True
    m = _NAME.match(stripped)
    end = m.end() if m else 0
    if end == len(stripped):
        return None
    name = stripped[:end]
    return stripped[end] == "(" and name.endswith(".call") and len(name) > len(".call")


def _mistral(rest: str) -> bool | None:
    stripped = rest.lstrip()
    if not stripped:
        return None
    if stripped[0] in "[{":
        return True
    m = _NAME.match(stripped)
    end = m.end() if m else 0
    if end == len(stripped):
        return None
    return end > 0 and stripped[end] in "[{"


def _mistral_body(text: str) -> int | None:
    """`[TOOL_CALLS][...]` balances from the list, `NAME[ARGS]{...}` after ARGS,
    `NAME{...}` (v11) from the object."""
    opener = len("[TOOL_CALLS]")
    rest = text[opener:]
    stripped = rest.lstrip()
    if not stripped:
        return None
    at = opener + len(rest) - len(stripped)
    if text[at] in "[{":
        return at
    m = _NAME.match(text, at)
    end = m.end() if m else at
    if end >= len(text):
        return None
    if text[end] == "{":
        return end
    args = text.find("[ARGS]", end)
    return None if args < 0 else args + len("[ARGS]")


def _functionary(rest: str) -> bool | None:
    """`>>>NAME` then a newline and a JSON object."""
    m = _NAME.match(rest)
    end = m.end() if m else 0
    if end == len(rest):
        return None
    if end == 0 or rest[end] != "\n":
        return False
    after = rest[end + 1 :].lstrip(" ")
    return None if not after else after[0] == "{"


def _functionary_body(text: str) -> int | None:
    at = text.find("\n")
    return None if at < 0 else at + 1


_BRACKET = re.compile(r"[{\[(]")


def _python_tag_body(text: str) -> int | None:
    m = _BRACKET.search(text, len("<|python_tag|>"))
    return None if m is None else m.start()


def _after_opener(length: int) -> Callable[[str], int | None]:
    return lambda text: length


def _hermes(tag: str) -> Marker:
    """A Hermes-2-Pro wrapper tag around a JSON call (llama.cpp accepts several)."""
    return Marker(f"<{tag}>", "hermes", viable=_json_start, end_tag=f"</{tag}>")


_HARMONY_STOPS = ("<|start|>", "<|channel|>")
_FRAMES = (
    "</think>", "</seed:think>", "<|end|>", "<|return|>", "<|call|>", "<|eot_id|>",
    "<|eom_id|>", "<|im_end|>", "<|python_end|>", ">>>all\n",
)  # fmt: skip
"""Framing tokens: a stray end of reasoning, harmony's and chat templates' end-of-message
tokens, Functionary's text channel."""

MARKERS: tuple[Marker, ...] = (
    # calls in tags
    Marker("<tool_call>", "hermes", viable=_tool_call, end_tag="</tool_call>"),
    *(_hermes(tag) for tag in ("tool", "tools", "JSON", "json", "response", "function_call")),
    Marker("<tool_calls>", "tool_calls", viable=_json_start, end_tag="</tool_calls>"),
    Marker("<seed:tool_call>", "seed_oss", end_tag="</seed:tool_call>"),
    Marker("<function=", "function_tag", viable=_name_then(">"), end_tag="</function>"),
    Marker('<function name="', "function_tag", end_tag="</function>"),
    Marker("<function_calls>", "olmo", end_tag="</function_calls>"),
    Marker(DS_CALLS_BEGIN, "deepseek", end_tag=DS_CALLS_END),
    Marker(DS_CALLS_R1, "deepseek", end_tag=DS_CALLS_END),
    Marker(DS_CALL_BEGIN, "deepseek", end_tag=DS_CALL_END),
    Marker("<minimax:tool_call>", "minimax", end_tag="</minimax:tool_call>"),
    Marker("<invoke name=", "minimax", viable=_quoted, end_tag="</invoke>"),
    Marker("<|tool_calls_section_begin|>", "kimi", end_tag="<|tool_calls_section_end|>"),
    Marker("<|tool_call_section_begin|>", "kimi", end_tag="<|tool_call_section_end|>"),
    Marker("<|action_start|><|plugin|>", "internlm", end_tag="<|action_end|>"),
    Marker("<|python_start|>", "llama4", end_tag="<|python_end|>"),
    # calls that end where their brackets balance
    Marker("<|tool_call|>", "granite", viable=_json_start),
    Marker(
        "<|python_tag|>", "python_tag", viable=_python_tag, body_at=_python_tag_body, chain=True
    ),
    Marker("[TOOL_CALLS]", "mistral", viable=_mistral, body_at=_mistral_body),
    Marker("[Tool call:", "markdown", viable=_name_then("(", spaced=True), from_opener=True),
    Marker(">>>", "functionary", viable=_functionary, body_at=_functionary_body),
    Marker("[", "pythonic", viable=list_viable, from_opener=True),
    Marker("{", "bare_json", viable=key_viable, from_opener=True, chain=True),
    # gpt-oss harmony: a header up to <|message|> says what follows
    Marker("<|start|>", "harmony", kind="header", end_tag="<|message|>"),
    Marker("<|channel|>", "harmony", kind="header", end_tag="<|message|>"),
    # framing tokens: never shown
    *(Marker(token, "frame", kind="frame") for token in _FRAMES),
)
"""Every marker found anywhere outside code. Within one first character, longer markers
are tried first (`<tool_calls>` before `<tool_call>`, `[TOOL_CALLS]` before `[`)."""

HARMONY_ANALYSIS = Marker(
    "<|channel|>analysis", "think", kind="think", close=("<|end|>",), stops=_HARMONY_STOPS
)
HARMONY_CALL = Marker("<|channel|>", "harmony", end_tag="<|call|>")

START_MARKERS: tuple[Marker, ...] = (
    Marker("<think>", "think", kind="think", close=("</think>",)),
    Marker("<seed:think>", "think", kind="think", close=("</seed:think>",)),
    Marker("functools", "functools", viable=lambda rest: None if not rest else rest[0] == "[",
           body_at=_after_opener(len("functools"))),
)  # fmt: skip
"""Markers recognised only at the start of a reply (or right after its reasoning): the
reasoning blocks models open their reply with (`<think>` in an answer's prose is a word
about tags, and must not hide the rest of the answer), and a word that is ordinary prose
anywhere else (Phi-4-mini / Firefunction `functools[...]`)."""


def _by_first(markers: tuple[Marker, ...]) -> dict[str, tuple[Marker, ...]]:
    groups: dict[str, list[Marker]] = {}
    for marker in markers:
        groups.setdefault(marker.text[0], []).append(marker)
    return {c: tuple(sorted(g, key=lambda m: -len(m.text))) for c, g in groups.items()}


BY_FIRST = _by_first(MARKERS)
BY_TWO: dict[str, tuple[Marker, ...]] = {
    two: tuple(m for m in BY_FIRST[two[0]] if m.text.startswith(two))
    for two in {m.text[:2] for m in MARKERS if len(m.text) > 1}
}
"""Markers of two characters or more by their first two (longest first)."""
SINGLE: dict[str, Marker] = {m.text: m for m in MARKERS if len(m.text) == 1}
"""One-character markers (`[`, `{`), tried after every longer one."""


def _may_open_pattern() -> str:
    seconds = sorted({m.text[1] for m in MARKERS if m.text[0] == "<"})
    angle = "<(?:[" + re.escape("".join(seconds)) + "]|$)"
    return angle + "|>(?:>|$)|[\\[{`]"


may_open = re.compile(_may_open_pattern()).search
"""Where markup or code may start in a delta: `<` followed by the second character of a
marker (or by the end of the delta), `>>`, `[`, `{` or a backtick. Built from `MARKERS`."""
