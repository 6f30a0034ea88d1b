"""Lone UTF-16 surrogates: paired where they can be, U+FFFD where they cannot.

JSON may escape any UTF-16 code unit (`"\\ud83d"`), so text decoded from a model stream, an
MCP server or a JS client can hold surrogates: an emoji's pair split across two chunks, or a
unit with no partner at all. A Python `str` keeps them, but UTF-8 cannot encode them, so an
event holding one fails in the store and on both wires. This module makes text encodable
where it enters: `scrub(text)` repairs one whole string (joining pairs, replacing the rest
with U+FFFD) and `scrub_counted` also says how many it replaced; `SurrogateJoiner` does the
same for a stream of chunks, holding a high surrogate that ends a chunk until the next one
(`flush()` turns a still-held one into U+FFFD at the stream's end); `scrub_json` repairs every
string of a JSON value; `repair_detail` words the `hook_action` / log line that says so
(`REPAIR_HOOK`, `REPAIR_ACTION`) and `scrub_values` repairs a frozen dataclass (a tool's
result) field by field. The common path is one `str.isascii()` (constant time in CPython)
or, for other text, one search of a compiled character class, and returns the text itself.
Pure functions, no I/O; used by the adapters and transports at their edges and by the
runtime's last-line checks (`log.py`, `tool_batch.py`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

__all__ = [
    "REPAIR_ACTION",
    "REPAIR_HOOK",
    "REPLACEMENT",
    "SURROGATE",
    "SurrogateJoiner",
    "has_surrogates",
    "repair_detail",
    "scrub",
    "scrub_counted",
    "scrub_json",
    "scrub_values",
]

T = TypeVar("T")

REPLACEMENT = "\ufffd"
"""What an unpairable surrogate becomes (U+FFFD REPLACEMENT CHARACTER)."""

REPAIR_HOOK = "text_repair"
REPAIR_ACTION = "replace_surrogates"
"""The `hook_action` (hook, action) that says text was repaired on its way in."""

SURROGATE = re.compile("[\ud800-\udfff]")
"""Finds any UTF-16 surrogate; for hot paths that inline `has_surrogates`."""
_SURROGATE = SURROGATE
_HIGH_FIRST, _HIGH_LAST = 0xD800, 0xDBFF


def has_surrogates(text: str) -> bool:
    """Whether `text` holds any UTF-16 surrogate (paired or not): what UTF-8 cannot encode."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def repair_detail(where: str, count: int) -> str:
    """The `hook_action` detail (and log line) for `count` repairs in `where`."""
    return (
        f"{where} held {count} lone UTF-16 surrogate(s) (half of an emoji's pair, or a broken"
        " escape) that UTF-8 cannot encode; each was replaced with U+FFFD"
    )


def scrub_counted(text: str) -> tuple[str, int]:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD, and how
    many were replaced. Returns `text` itself (and 0) when it holds none."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text, 0
    repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return repaired, repaired.count(REPLACEMENT) - text.count(REPLACEMENT)


def scrub(text: str) -> str:
    """`text` made encodable (see `scrub_counted`); `text` itself when it already is."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return scrub_counted(text)[0]


def scrub_json(value: Any) -> Any:
    """A JSON-shaped value (dicts, lists, tuples, strings, scalars) with every string,
    keys included, made encodable; other values are returned as they are."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_json(k): scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(item) for item in value]
    return value


def scrub_values(value: T) -> tuple[T, int]:
    """A frozen value (a dataclass, a tuple of them, a string, a scalar) with every string
    made encodable, rebuilt only where something changed; and how many were replaced."""
    if isinstance(value, str):
        return scrub_counted(value)  # type: ignore[return-value]
    if isinstance(value, tuple):
        items = [scrub_values(item) for item in value]
        total = sum(count for _, count in items)
        return (tuple(item for item, _ in items) if total else value), total  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes: dict[str, Any] = {}
        total = 0
        for spec in dataclasses.fields(value):
            old = getattr(value, spec.name)
            new, count = scrub_values(old)
            if count or new is not old:
                changes[spec.name] = new
                total += count
        return (dataclasses.replace(value, **changes) if changes else value), total
    return value, 0


class SurrogateJoiner:
    """Makes one stream of text chunks encodable, joining pairs split between chunks.

    `feed(chunk)` returns what can be emitted now (possibly ""): a high surrogate that ends
    the chunk is held back, since its low half may open the next one. `flush()` returns
    what is still held, as U+FFFD, when the stream (or this part of it) ends. `replaced`
    counts the surrogates that became U+FFFD.

        joiner = SurrogateJoiner()
        joiner.feed("\\ud83d") + joiner.feed("\\ude00!") + joiner.flush()  # "😀!"
    """

    __slots__ = ("held", "replaced")

    def __init__(self) -> None:
        self.held = ""
        self.replaced = 0

    def feed(self, chunk: str) -> str:
        """What of `chunk` (after anything held) can be emitted now."""
        if not self.held and (chunk.isascii() or _SURROGATE.search(chunk) is None):
            return chunk  # the common case: nothing held, nothing to repair
        text = self.held + chunk
        self.held = ""
        if text and _HIGH_FIRST <= ord(text[-1]) <= _HIGH_LAST:
            self.held, text = text[-1], text[:-1]
        repaired, count = scrub_counted(text)
        self.replaced += count
        return repaired

    def flush(self) -> str:
        """A held high surrogate as U+FFFD (its pair never came), else ""."""
        if not self.held:
            return ""
        self.held = ""
        self.replaced += 1
        return REPLACEMENT
