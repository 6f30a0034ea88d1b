"""Pseudo tool-call recovery: calls a model wrote as text become real tool calls.

When the quality layer runs and a step offers tools, the loop passes the text the model
streams through a `PseudoCallFilter`: the streaming stripper (`tool_text.py`) holds back
only what may be markup, the format parsers (`tool_formats.py`) read each candidate, and a
candidate becomes `ToolCallChunk`s (with `recovered_from` set to its format) only when
every call in it names an offered tool and its arguments validate against that tool's
schema. Anything else, including markup shown inside code and calls to tools that were not
offered, comes out as the exact text the model wrote. The loop logs each recovered call as
`hook_action` `recover_tool_call` and runs it like any other call (permission included).
Reasoning the model wrote as text (`<think>...</think>`, `<seed:think>`, harmony's analysis
channel) comes out as `ReasoningChunk`s, never as answer text; with no tools offered the
filter looks for reasoning only (`calls=False`). `plain(delta)` is the cheap test for the
common case (prose while nothing is held), so the loop pays almost nothing for text that
holds no markup.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from steerable_bridge.runtime.model_quality.tool_formats import TextCall, parse_markup
from steerable_bridge.runtime.model_quality.tool_text import (
    Markup,
    MarkupStripper,
    Piece,
    Reasoning,
)
from steerable_bridge.runtime.ports.model import (
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)
from steerable_bridge.runtime.ports.tools import schema_error
from steerable_bridge.runtime.values import canonical_json

__all__ = ["PseudoCallFilter", "text_call_prefix"]


class PseudoCallFilter:
    """Turns one model call's text into text chunks and recovered tool-call chunks."""

    def __init__(
        self, tools: tuple[ToolSpec, ...], *, id_prefix: str = "textcall", calls: bool = True
    ) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._stripper = MarkupStripper(calls=calls and bool(tools))
        self.plain = self._stripper.plain
        """True when `delta` passes unchanged (no need to call `feed`): the stripper's own
        test, bound here so the per-delta check is one call."""
        self._prefix = id_prefix
        self.recovered = 0

    def feed(self, delta: str) -> list[ModelChunk]:
        return self._resolve(self._stripper.feed(delta))

    def finish(self) -> list[ModelChunk]:
        return self._resolve(self._stripper.finish())

    def _resolve(self, pieces: list[Piece]) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(TextChunk(delta=piece))
                continue
            if isinstance(piece, Reasoning):
                out.append(ReasoningChunk(delta=piece.text))
                continue
            calls = self._valid_calls(piece)
            if calls is None:
                out.append(TextChunk(delta=piece.raw))
                continue
            for name, arguments in calls:
                self.recovered += 1
                out.append(
                    ToolCallChunk(
                        call_id=f"{self._prefix}_{self.recovered}",
                        name=name,
                        arguments_delta=arguments,
                        recovered_from=piece.format,
                    )
                )
        return out

    def _valid_calls(self, markup: Markup) -> list[tuple[str, str]] | None:
        calls = parse_markup(markup)
        if not calls:
            return None
        valid: list[tuple[str, str]] = []
        for call in calls:
            arguments = self._arguments(call)
            if arguments is None:
                return None
            valid.append((call.name, arguments))
        return valid

    def _arguments(self, call: TextCall) -> str | None:
        """The call's arguments as canonical JSON when the tool exists and they validate."""
        tool = self._tools.get(call.name)
        if tool is None:
            return None
        candidates = [call.arguments]
        if call.loose:
            candidates.append({k: _typed(v) for k, v in call.arguments.items()})
        for args in candidates:
            if schema_error(tool.parameters_json, args) is None:
                return canonical_json(args)
        return None


def _typed(value: Any) -> Any:
    """A bare-string parameter read as JSON when it is JSON (`3`, `true`, `{...}`)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def text_call_prefix(request: ModelRequest) -> str:
    """Ids for recovered calls, unique per step of a session and the same on every replay."""
    last = request.messages[-1] if request.messages else None
    seed = f"{len(request.messages)}|{last.role if last else ''}|{last.text if last else ''}"
    return "textcall_" + hashlib.sha1(seed.encode("utf-8")).hexdigest()[:10]
