"""The demo model: keyless, deterministic, and able to show every feature on request."""

from __future__ import annotations

import json

import anyio
import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import (
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import Message, TextPart

from ...runtime.harness import assert_well_formed, make_agent, of, prompt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TOOLS = tuple(tool.spec() for tool in builtin_tools())


def ask(text: str) -> ModelRequest:
    message = Message(id="u", role="user", content=(TextPart(text=text),))
    return ModelRequest(model="demo:default", system="", messages=(message,), tools=TOOLS)


async def stream(request: ModelRequest) -> list[ModelStreamItem]:
    with anyio.fail_after(5):
        return [item async for item in DemoProvider(pace_ms=0).stream(request)]


def text(items: list[ModelStreamItem]) -> str:
    return "".join(i.delta for i in items if isinstance(i, TextChunk))


async def test_it_says_it_is_the_demo_model_and_is_deterministic() -> None:
    first, second = await stream(ask("hello")), await stream(ask("hello"))
    assert first == second
    assert "demo model" in text(first)
    assert "--model openai:NAME" in text(first)  # tells the user how to get a real model
    assert isinstance(first[-1], ModelResponse) and first[-1].finish_reason == "end_turn"
    assert first[-1].usage.completion_tokens > 0
    assert len([i for i in first if isinstance(i, TextChunk)]) > 5  # streams word by word


async def test_think_shows_reasoning_before_the_answer() -> None:
    got = await stream(ask("please think about it"))
    first_text = next(n for n, i in enumerate(got) if isinstance(i, TextChunk))
    assert first_text > 0 and all(isinstance(i, ReasoningChunk) for i in got[:first_text])


async def test_tool_asks_for_a_calculation() -> None:
    got = await stream(ask("use a tool"))
    calls = [i for i in got if isinstance(i, ToolCallChunk)]
    assert calls[0].name == "calculate"
    assert json.loads("".join(c.arguments_delta for c in calls)) == {"expression": "6 * 7"}
    assert isinstance(got[-1], ModelResponse) and got[-1].finish_reason == "tool_calls"


async def test_error_is_a_provider_error_with_a_stable_code() -> None:
    with pytest.raises(ProviderError) as info:
        await stream(ask("show me an error"))
    assert info.value.code == "demo_error"


async def test_a_full_turn_with_a_tool_answers_with_the_result() -> None:
    agent = make_agent(DemoProvider(pace_ms=0), tools=builtin_tools())
    session = await agent.new_session("/work")
    outcome, seen = await prompt(session, "use a tool")
    assert outcome.stop_reason == "end_turn"
    assert of(seen, ev.ToolFinished)[0].content == (TextPart(text="6 * 7 = 42"),)
    final = "".join(e.delta for e in of(seen, ev.TextDelta))
    assert "6 * 7 = 42" in final
    assert_well_formed(seen)


async def test_plan_updates_the_plan() -> None:
    agent = make_agent(DemoProvider(pace_ms=0), tools=builtin_tools())
    session = await agent.new_session("/work")
    _, seen = await prompt(session, "make a plan")
    plan = of(seen, ev.PlanUpdated)[0]
    assert [e.status for e in plan.entries] == ["completed", "in_progress", "pending"]
