"""Tool exposure tiers: which tools a step offers the model, and `tool_search` over the rest.

Small models degrade when a request carries dozens of tool schemas (an MCP server brings
many). Each `Tool` has an `exposure`: `direct` (always offered), `deferred` (offered only
once `tool_search` found it), `hidden` (never offered), or `auto` (MCP tools: direct while
every schema the step would offer fits the token budget, all deferred once they do not, so
one more MCP tool never shifts a boundary; the budget is `QualitySettings.tool_budget`, by
default a tenth of the model's context window). When any tool is deferred the step also
offers `tool_search`, which ranks the deferred tools by name and description, returns at
most `limit` of them with their full schemas and makes them callable from the next step on.
The offered list keeps its order (direct tools as registered, `tool_search`, then found
tools in the order they were found), so it stays byte-stable between steps unless it
changes, and a prompt cache keeps hitting.

`ToolShelf` is one session's state (what was found); `ModelStep` asks it for each step's
tools and logs `hook_action` `tool_exposure` (`defer`, `activate`) when they change.
Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from steerable_bridge.runtime.model_context.tokens import estimate_text_tokens
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import TextPart

__all__ = ["SEARCH_TOOL", "ToolShelf", "default_budget"]

SEARCH_TOOL = "tool_search"
MAX_RESULTS = 8
_WORD = re.compile(r"[a-z0-9]+|[^\W\d_]+", re.I)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def default_budget(window: int | None) -> int:
    """Schema tokens `auto` tools may fill: a tenth of the window, 4,000 when unknown."""
    return max(1_000, window // 10) if window else 4_000


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))}


def _cost(tool: Tool) -> int:
    spec = tool.spec()
    return estimate_text_tokens(spec.name + spec.description + spec.parameters_json)


class ToolShelf:
    """One session's tool tiers: what is deferred now and what `tool_search` found."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget
        self.found: list[str] = []
        """Deferred tools `tool_search` returned, in the order it returned them."""
        self.deferred: tuple[Tool, ...] = ()
        """The tools the last `offer` deferred."""
        self.logged: tuple[int, int] = (0, 0)
        """(deferred, found) counts last logged, so a change is logged once."""
        self._costs: dict[str, tuple[str, int]] = {}
        self.search = Tool(
            name=SEARCH_TOOL,
            description=(
                "Find more tools. Many tools are not listed to keep this request small;"
                " describe what you need in a few words and the best matches come back"
                " with their full parameters. A tool found here can be called from your"
                " next step on."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_RESULTS,
                        "description": f"How many tools to return (default 5, at most"
                        f" {MAX_RESULTS})",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            kind="search",
            handler=self._search,
            parallel_safe=True,
        )

    def offer(self, tools: Sequence[Tool], window: int | None) -> tuple[Tool, ...]:
        """The tools one step offers, in a stable order; see the module docstring."""
        budget = self.budget if self.budget is not None else default_budget(window)
        candidates = [t for t in tools if t.exposure != "hidden" and t.name != SEARCH_TOOL]
        offered = [t for t in candidates if t.exposure != "deferred"]
        over = sum(self._cost_of(t) for t in offered) > budget
        direct = [t for t in offered if not (over and t.exposure == "auto")]
        deferred = [
            t for t in candidates if t.exposure == "deferred" or (over and t.exposure == "auto")
        ]
        self.deferred = tuple(deferred)
        if not deferred:
            return tuple(direct)
        by_name = {tool.name: tool for tool in deferred}
        found = [by_name[name] for name in self.found if name in by_name]
        return (*direct, self.search, *found)

    def _cost_of(self, tool: Tool) -> int:
        key = tool.description + repr(tool.parameters)
        cached = self._costs.get(tool.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        cost = _cost(tool)
        self._costs[tool.name] = (key, cost)
        return cost

    def rank(self, query: str, limit: int) -> list[Tool]:
        """The deferred tools that best match `query`, best first (ties: registration order)."""
        terms = _words(query)
        phrase = query.strip().lower()
        scored: list[tuple[int, int, Tool]] = []
        for order, tool in enumerate(self.deferred):
            name_words = _words(tool.name.replace("_", " ").replace(".", " "))
            score = 3 * len(terms & name_words) + len(terms & _words(tool.description))
            if phrase and phrase in tool.name.lower():
                score += 5
            if score > 0:
                scored.append((-score, order, tool))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [tool for _, _, tool in scored[:limit]]

    async def _search(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = str(args.get("query", ""))
        limit = min(MAX_RESULTS, max(1, int(args.get("limit") or 5)))
        matches = self.rank(query, limit)
        if not matches:
            return ToolResult(
                content=(
                    TextPart(
                        text=f"No tool matches {query!r}. Try other words (what the tool acts"
                        " on, what it does), or answer with the tools you have."
                    ),
                )
            )
        for tool in matches:
            if tool.name not in self.found:
                self.found.append(tool.name)
        listed = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in matches
        ]
        text = (
            f"{len(matches)} tool(s) found; you can call them from your next step on:\n"
            + json.dumps(listed, ensure_ascii=False, indent=1)
        )
        return ToolResult(content=(TextPart(text=text),))
