"""Strict JSON at the edges: text from a client is parsed only if every parser would agree.

Both transports read JSON from strangers (ACP frames on stdin, AG-UI bodies over HTTP) and
write JSON to clients whose parsers are strict (serde_json, `JSON.parse`). Python's `json`
is lenient in ways that hurt there: it reads `NaN` / `Infinity`, turns `1e400` into an
infinite float, accepts lone UTF-16 surrogates (`"\\ud800"`) and, given bytes, even
surrogate code points encoded as UTF-8; it raises `RecursionError` (not `ValueError`) on
~1,000-deep nesting, and writes `NaN` back out. `loads_strict` refuses all of that with
one exception type, `JsonRefused` (a `ValueError` carrying a stable `code`), and checks the
nesting depth with a scan before the recursive parser runs; `scrub` makes any value safe to
write (non-finite floats become null, lone surrogates U+FFFD, pairs joined: `surrogates.py`).
Written here because the standard library has no strict mode and no depth bound; no I/O.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from steerable_bridge.runtime.encoding.surrogates import scrub as scrub_text
from steerable_bridge.runtime.errors import CodedError

__all__ = ["MAX_DEPTH", "JsonRefused", "loads_strict", "nesting_exceeds", "scrub", "writable"]

MAX_DEPTH = 64
"""Deepest nesting of arrays / objects accepted; protocol messages need far less."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"[\[{][\]}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JsonRefused(CodedError, ValueError):
    """Text that strict JSON refuses; `code` is one of `not_utf8`, `not_json`, `too_deep`,
    `non_finite` (NaN / Infinity literals), `out_of_range` (a number no double holds) or
    `lone_surrogate`, and the message names the remedy."""


def nesting_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether `text` nests arrays / objects deeper than `limit` (or may: unbalanced text
    with more than `limit` brackets counts as too deep). Strings are skipped; cheap."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(limit):
        brackets, removed = _INNERMOST.subn("", brackets)
        if not brackets:
            return False
        if not removed:
            return len(brackets) > limit
    return True


def _refuse_constant(name: str) -> Any:
    raise JsonRefused("non_finite", f"{name} is not JSON; send numbers as finite decimals")


class _Overflow(Exception):
    """A number no double holds, met by the shared decoder: parse again, noting it."""


def _float_or_overflow(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Overflow(text)
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_float_or_overflow)
"""One decoder for every text. `json.loads` with options makes a decoder per call, and its
C scanner looks its options up by names it makes then (`strict`, `parse_float`, ...): six
new strings a call that CPython's type attribute cache keeps (it holds the name of each
lookup), scattered through the memory a burst of requests used, each keeping an arena of
its allocator from going back. A text holding a number no double holds (rare) is parsed
again the old way, with a decoder of its own that notes the number and goes on, so which
refusal such a text gets is unchanged."""


def _decode(text: str, floats: _Floats) -> Any:
    """`_DECODER`'s value, or `json.loads`'s for a text with a number no double holds or a
    byte order mark (which `json.loads` refuses and a decoder alone would not)."""
    if not text.startswith("\ufeff"):
        try:
            return _DECODER.decode(text)
        except _Overflow:
            pass
    return json.loads(text, parse_constant=_refuse_constant, parse_float=floats)


class _Floats:
    """`parse_float` that notes a number no double holds instead of making it infinite."""

    def __init__(self) -> None:
        self.overflow: str | None = None

    def __call__(self, text: str) -> float:
        value = float(text)
        if math.isinf(value):
            self.overflow = self.overflow or text
            return 0.0
        return value


def loads_strict(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text strictly (see the module docstring); raises only `JsonRefused`."""
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonRefused(
                "not_utf8",
                f"the text is not valid UTF-8 (byte {err.object[err.start]:#04x} at offset"
                f" {err.start}); send UTF-8",
            ) from None
    else:
        text = data
    if nesting_exceeds(text, max_depth):
        raise JsonRefused("too_deep", f"the JSON nests deeper than {max_depth} levels; flatten it")
    floats = _Floats()
    try:
        value = _decode(text, floats)
    except JsonRefused:
        raise
    except (ValueError, RecursionError) as err:
        raise JsonRefused("not_json", f"the text is not JSON ({err})") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) and not writable(value):
        raise JsonRefused(
            "lone_surrogate",
            "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff without its pair);"
            " send valid Unicode",
        )
    if floats.overflow is not None:  # valid JSON, but no double holds it
        raise JsonRefused(
            "out_of_range",
            f"the number {floats.overflow[:40]} does not fit a 64-bit float; send a smaller one",
        )
    return value


def writable(value: Any) -> bool:
    """Whether `value` encodes as strict JSON in UTF-8 (no NaN / Infinity, no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def scrub(value: Any) -> Any:
    """`value` made writable: non-finite floats become None, lone surrogates U+FFFD."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return scrub_text(value)  # pairs split into two units are joined, not replaced
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    return value
