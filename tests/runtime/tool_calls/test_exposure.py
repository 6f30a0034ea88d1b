"""Tool exposure tiers: with 200 MCP-style tools a request carries only the direct tools and
`tool_search`; a tool it finds is callable on the next step; the offered list stays
byte-stable between steps; hidden tools are never offered."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.tool_calls.exposure import SEARCH_TOOL, ToolShelf, default_budget
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import assert_well_formed, make_agent, of, prompt, scripted, text_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def mcp_tools(ran: list[dict[str, Any]]) -> list[Tool]:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args)
        return ToolResult(content=(TextPart(text="sunny"),))

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [
        Tool(
            name=f"srv_item_{i}",
            description=f"Manage inventory item {i} of the warehouse: counts, bins and moves",
            parameters={"type": "object", "properties": {"sku": {"type": "string"}}},
            exposure="auto",
        )
        for i in range(199)
    ]
    tools.insert(
        120,
        Tool(
            name="srv_weather_forecast",
            description="Get the weather forecast for a city",
            parameters=schema,
            kind="fetch",
            handler=handler,
            exposure="auto",
        ),
    )
    return tools


def names(request: Any) -> list[str]:
    return [spec.name for spec in request.tools]


async def test_two_hundred_mcp_tools_wait_behind_tool_search_and_a_match_is_callable() -> None:
    ran: list[dict[str, Any]] = []
    search = {"id": "s1", "name": SEARCH_TOOL, "arguments": {"query": "weather"}}
    forecast = {"id": "w1", "name": "srv_weather_forecast", "arguments": {"city": "Paris"}}
    model = scripted(
        {"tool_calls": [search]}, {"tool_calls": [forecast]}, {"text": "It is sunny in Paris."}
    )
    hidden = Tool(name="internal", description="never offered", exposure="hidden")
    tools = [text_tool(), *mcp_tools(ran), hidden]
    agent = make_agent(model, tools=tools, quality=QualitySettings(mode="on"))
    outcome, seen = await prompt(await agent.new_session("/w"))
    assert outcome.stop_reason == "end_turn"
    first, second, third = (e.request for e in of(seen, ev.ModelRequestEvent))
    assert names(first) == ["echo", SEARCH_TOOL]
    assert names(second) == ["echo", SEARCH_TOOL, "srv_weather_forecast"]
    assert second.tools == third.tools  # byte-stable while nothing changes
    assert first.tools == second.tools[:2]  # found tools are appended: the prefix holds
    found = of(seen, ev.ToolFinished)[0]
    assert found.status == "completed"
    assert '"city"' in found.content[0].text  # type: ignore[union-attr]  # full schema
    assert ran == [{"city": "Paris"}]
    actions = [(e.hook, e.action) for e in of(seen, ev.HookAction)]
    assert actions == [("tool_exposure", "defer"), ("tool_exposure", "activate")]
    assert "srv_weather_forecast" in of(seen, ev.HookAction)[1].detail
    assert_well_formed(seen)


async def test_a_few_mcp_tools_within_the_budget_are_offered_directly() -> None:
    model = scripted({"text": "hi"})
    tools = [text_tool(), *mcp_tools([])[:3]]
    agent = make_agent(model, tools=tools, quality=QualitySettings(mode="on"))
    _, seen = await prompt(await agent.new_session("/w"))
    request = of(seen, ev.ModelRequestEvent)[0].request
    assert names(request) == ["echo", "srv_item_0", "srv_item_1", "srv_item_2"]
    assert of(seen, ev.HookAction) == []


def test_search_ranks_by_name_then_description_and_bounds_the_results() -> None:
    shelf = ToolShelf(budget=10)
    shelf.offer(mcp_tools([]), None)
    assert len(shelf.deferred) == 200
    assert [t.name for t in shelf.rank("weather forecast", 5)] == ["srv_weather_forecast"]
    assert len(shelf.rank("warehouse inventory item", 3)) == 3
    assert shelf.rank("quantum chromodynamics", 5) == []


def test_the_budget_defaults_from_the_window() -> None:
    # `tool_budget=` in `--quality` is checked in tests/commands/test_quality_flag.py.
    assert default_budget(128_000) == 12_800 and default_budget(None) == 4_000
