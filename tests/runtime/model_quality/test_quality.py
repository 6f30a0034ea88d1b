"""The quality guards in real turns: dedup, error breaker, soft timeout, budgets, calibration."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.permissions import (
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import (
    assert_well_formed,
    call,
    kinds,
    make_agent,
    of,
    prompt,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

ON = QualitySettings(mode="on")


def actions(events: list[ev.LoopEvent]) -> list[tuple[str, str]]:
    return [(e.hook, e.action) for e in of(events, ev.HookAction)]


def test_auto_mode_is_on_for_openai_routes_only() -> None:
    auto = QualitySettings()
    assert auto.active_for("openai:qwen2.5") and not auto.active_for("demo:default")
    assert QualitySettings(mode="on").active_for("demo:default")
    assert not QualitySettings(mode="off").active_for("openai:x")


async def test_a_repeated_call_is_answered_from_the_earlier_result_without_running() -> None:
    runs: list[str] = []

    async def read(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        runs.append(ctx.call_id)
        return ToolResult(content=(TextPart(text="contents of a.txt"),))

    tool = Tool(
        name="read",
        description="",
        kind="read",
        handler=read,
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    model = scripted(
        {"tool_calls": [call("c1", "read", path="a.txt")]},
        {"tool_calls": [{"id": "c2", "name": "read", "arguments_text": '{ "path" : "a.txt" }'}]},
        {"text": "It says hello."},
    )
    session = await make_agent(model, tools=[tool], quality=ON).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert runs == ["c1"]
    started = [e.call_id for e in of(seen, ev.ToolStarted)]
    assert started == ["c1"]
    second = of(seen, ev.ToolFinished)[1]
    assert second.call_id == "c2" and second.status == "completed"
    assert "identical to c1" in second.content[0].text  # type: ignore[union-attr]
    assert second.content[1] == TextPart(text="contents of a.txt")
    action = of(seen, ev.HookAction)[0]
    assert (action.hook, action.action, action.call_id) == ("dedup", "dedup", "c2")
    assert_well_formed(seen)


async def test_dedup_forgets_results_after_a_change() -> None:
    model = scripted(
        {"tool_calls": [call("c1", "look", text="x")]},
        {"tool_calls": [call("c2", "change", text="y")]},
        {"tool_calls": [call("c3", "look", text="x")]},
        {"text": "done"},
    )
    tools = [text_tool("look"), text_tool("change", kind="edit")]
    session = await make_agent(model, tools=tools, quality=ON).new_session("/w")
    _, seen = await prompt(session)
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1", "c2", "c3"]
    assert actions(seen) == []


async def test_a_repeated_call_that_needs_permission_is_not_asked_again() -> None:
    asked: list[str] = []

    async def ask(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.call_id)
        return PermissionAnswer(outcome="allow_once", option_id="allow_once")

    model = scripted(
        {"tool_calls": [call("c1", "run", text="make")]},
        {"tool_calls": [call("c2", "run", text="make")]},
        {"text": "built"},
    )
    agent = make_agent(model, tools=[text_tool("run", kind="execute")], quality=ON)
    session = await agent.new_session("/w")
    session.policy = StaticPolicy("ask", ask)
    _, seen = await prompt(session)
    assert asked == ["c1"]
    assert [e.call_id for e in of(seen, ev.PermissionRequested)] == ["c1"]
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1"]
    assert actions(seen) == [("dedup", "dedup")]


async def test_a_model_stuck_repeating_is_steered_to_a_final_answer_after_three_dedups() -> None:
    model = scripted(
        *[{"tool_calls": [call(f"c{i}", text="same")]} for i in range(1, 5)],
        {"text": "Here is what I found."},
    )
    session = await make_agent(model, tools=[text_tool()], quality=ON).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1"]
    assert actions(seen) == [("dedup", "dedup")] * 3 + [("dedup", "steer_out")]
    last = of(seen, ev.ModelRequestEvent)[-1].request
    assert last.tools == ()
    assert "Tools are closed" in last.messages[-1].text
    assert_well_formed(seen)


async def test_a_model_that_calls_tools_after_they_closed_ends_the_turn() -> None:
    model = scripted({"tool_calls": [call("c", text="same")]}, loop=True)
    session = await make_agent(model, tools=[text_tool()], quality=ON).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert actions(seen)[-1] == ("wrap_up", "end_turn")
    assert len(of(seen, ev.StepStarted)) == 5  # 1 run, 3 dedups, 1 step with tools closed
    assert_well_formed(seen)


async def test_the_breaker_skips_the_rest_of_the_batch_and_tells_the_model() -> None:
    async def broken(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolFailure("io_error", "disk unreadable")

    tool = Tool(name="broken", description="", kind="edit", handler=broken)
    model = scripted(
        {"tool_calls": [call(f"c{i}", "broken") for i in range(1, 6)]},
        {"text": "I could not read the disk."},
    )
    session = await make_agent(model, tools=[tool], quality=ON).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1", "c2", "c3"]
    assert "permission_requested" not in kinds(seen)
    skipped = of(seen, ev.ToolFinished)[3:]
    assert [(e.call_id, e.error.code if e.error else "") for e in skipped] == [
        ("c4", "breaker_skipped"),
        ("c5", "breaker_skipped"),
    ]
    assert actions(seen) == [("breaker", "skip"), ("breaker", "skip"), ("breaker", "trip")]
    second = of(seen, ev.ModelRequestEvent)[1].request
    assert [m.role for m in second.messages][-2:] == ["tool", "user"]
    assert "failed" in second.messages[-1].text and len(second.tools) == 1
    assert_well_formed(seen)


async def test_soft_timeout_wraps_up_instead_of_killing_the_turn() -> None:
    model = scripted(
        {"tool_calls": [call("c1", text="a")]},
        {"text": "Summary: partial."},
    )
    quality = QualitySettings(mode="on", soft_timeout_s=0)
    session = await make_agent(model, tools=[text_tool()], quality=quality).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    timeout = of(seen, ev.SoftTimeout)[0]
    assert timeout.limit_ms == 0 and timeout.elapsed_ms >= 0
    assert actions(seen) == [("soft_timeout", "wrap_up")]
    assert of(seen, ev.ModelRequestEvent)[1].request.tools == ()
    assert kinds(seen).index("soft_timeout") < kinds(seen).index("step_started", 5)
    assert_well_formed(seen)


async def test_a_model_call_past_its_deadline_wraps_up_under_the_soft_timeout() -> None:
    model = scripted(
        {"tool_calls": [call("c1", text="a")], "hang": True},
        {"text": "Summary: nothing yet."},
    )
    quality = QualitySettings(mode="on", soft_timeout_s=300)
    agent = make_agent(model, tools=[text_tool()], quality=quality, model_timeout_s=0.2)
    outcome, seen = await prompt(await agent.new_session("/w"))
    assert outcome.stop_reason == "end_turn"
    assert actions(seen) == [("soft_timeout", "wrap_up")]
    assert "ran out of time" in of(seen, ev.HookAction)[0].detail
    assert of(seen, ev.ModelRequestEvent)[1].request.tools == ()
    finished = of(seen, ev.ToolFinished)
    assert [(f.call_id, f.status) for f in finished] == [("c1", "cancelled")]
    assert_well_formed(seen)


async def test_a_wrap_up_call_past_its_deadline_fails_the_turn_with_model_timeout() -> None:
    model = scripted({"text": "a", "hang": True}, {"text": "b", "hang": True})
    quality = QualitySettings(mode="on", soft_timeout_s=300)
    agent = make_agent(model, quality=quality, model_timeout_s=0.2)
    outcome, seen = await prompt(await agent.new_session("/w"))
    assert outcome.error_code == "model_timeout"
    assert actions(seen) == [("soft_timeout", "wrap_up")]
    assert_well_formed(seen)


async def test_the_tool_call_budget_ends_the_turn_without_dangling_calls() -> None:
    model = scripted(
        {"tool_calls": [call("c1", text="a"), call("c2", text="b")]},
        {"tool_calls": [call("c3", text="c"), call("c4", text="d")]},
    )
    quality = QualitySettings(mode="on", max_tool_calls=3)
    session = await make_agent(model, tools=[text_tool()], quality=quality).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "max_steps"
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1", "c2", "c3"]
    assert of(seen, ev.ToolFinished)[-1].error.code == "budget_exhausted"  # type: ignore[union-attr]
    budget = of(seen, ev.BudgetExhausted)[0]
    assert (budget.budget, budget.limit, budget.used) == ("tool_calls", 3, 3)
    assert_well_formed(seen)


async def test_the_token_budget_counts_reported_usage() -> None:
    usage = {"prompt_tokens": 600, "completion_tokens": 10}
    model = scripted(
        {"tool_calls": [call("c1", text="a")], "usage": usage},
        {"tool_calls": [call("c2", text="b")], "usage": usage},
        {"text": "never"},
    )
    quality = QualitySettings(mode="on", max_turn_tokens=1000)
    session = await make_agent(model, tools=[text_tool()], quality=quality).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "max_tokens"
    budget = of(seen, ev.BudgetExhausted)[0]
    assert (budget.budget, budget.limit, budget.used) == ("tokens", 1000, 1220)
    assert len(of(seen, ev.StepStarted)) == 2
    assert_well_formed(seen)


async def test_an_empty_answer_after_tools_is_asked_to_narrate_once() -> None:
    model = scripted({"tool_calls": [call("c1", text="a")]}, {"text": ""}, {"text": "I echoed a."})
    session = await make_agent(model, tools=[text_tool()], quality=ON).new_session("/w")
    _, seen = await prompt(session)
    assert actions(seen) == [("empty_answer", "narrate")]
    assert of(seen, ev.ModelRequestEvent)[-1].request.tools == ()


async def test_quality_off_changes_nothing() -> None:
    model = scripted({"tool_calls": [call("c", text="same")]}, loop=True)
    session = await make_agent(model, tools=[text_tool()], max_steps=5).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "max_steps"
    assert len(of(seen, ev.ToolStarted)) == 5 and actions(seen) == []


async def test_calibration_learns_from_every_response_that_reports_prompt_tokens() -> None:
    rounds = [{"text": "ok", "usage": {"prompt_tokens": 500, "completion_tokens": 1}}] * 20
    agent = make_agent(scripted(*rounds))
    session = await agent.new_session("/w")
    for _ in range(20):
        await prompt(session)
    assert agent.calibration.samples("test:m") == 20
    assert agent.calibration.factor("test:m") > 1.0
