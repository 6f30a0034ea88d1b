"""The text tool-call corpus (`data/tool_formats/*.json`) and how to stream a case through
the recovery filter: shared by the corpus tests and `bench/tool_formats.py`.

Each case has the family, the raw model text, the calls it must yield (name and exact
arguments; none when `must_not_run`), the visible text and the reasoning it must leave,
and where the format comes from (a server's parser tests or chat template)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from steerable_bridge.runtime.model_quality.pseudo_calls import PseudoCallFilter
from steerable_bridge.runtime.model_quality.tool_markers import MARKERS
from steerable_bridge.runtime.ports.model import (
    ModelChunk,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)
from steerable_bridge.runtime.values import canonical_json

DATA = Path(__file__).parent / "data" / "tool_formats"
TOOLS = tuple(
    ToolSpec(name=name, description="", parameters_json=canonical_json(schema))
    for name, schema in json.loads((DATA / "tools.json").read_text("utf-8")).items()
)
CASES: dict[str, dict[str, Any]] = {
    case["name"]: case
    for path in sorted(DATA.glob("*.json"))
    if path.name != "tools.json"
    for case in json.loads(path.read_text("utf-8"))["cases"]
}
LEAK_MARKERS = tuple(
    sorted({m.text for m in MARKERS if len(m.text) > 2} | {"</tool_call>", "<arg_key>",
           "<parameter=", "<|message|>", "<|tool_call_begin|>", "functools["})
)  # fmt: skip
"""Markup that must never reach the visible text of a case whose calls ran."""


def run(
    chunks: list[str], tools: tuple[ToolSpec, ...] = TOOLS
) -> tuple[str, str, list[dict[str, Any]]]:
    """Feed the chunks; returns the visible text, the reasoning and the recovered calls."""
    recovery = PseudoCallFilter(tools)
    out: list[ModelChunk] = []
    for chunk in chunks:
        out += recovery.feed(chunk)
    out += recovery.finish()
    text = "".join(c.delta for c in out if isinstance(c, TextChunk))
    reasoning = "".join(c.delta for c in out if isinstance(c, ReasoningChunk))
    calls = [
        {"name": c.name, "arguments": json.loads(c.arguments_delta)}
        for c in out
        if isinstance(c, ToolCallChunk)
    ]
    return text, reasoning, calls


def fragments(text: str, low: int, high: int, seed: int) -> list[str]:
    """`text` in pieces of `low`..`high` characters, the sizes drawn from `seed`."""
    rng = random.Random(seed)
    out: list[str] = []
    i = 0
    while i < len(text):
        n = rng.randint(low, high)
        out.append(text[i : i + n])
        i += n
    return out


def splittings(text: str) -> list[list[str]]:
    """The adversarial splittings: every single cut, 1-character pieces, 3-7-character
    pieces (five draws)."""
    cuts = [[text[:i], text[i:]] for i in range(1, len(text))]
    return [[text], *cuts, list(text), *(fragments(text, 3, 7, seed) for seed in range(5))]


def leaks(shown: str) -> int:
    """How many markup characters the visible text holds."""
    return sum(shown.count(marker) * len(marker) for marker in LEAK_MARKERS)
