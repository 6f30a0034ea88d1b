"""Hooks change a real turn at five points, and every change is logged as `hook_action`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from steerable_bridge.runtime import (
    Accept,
    Hook,
    HookContext,
    Narrate,
    Reject,
    Retry,
    Rewrite,
    Veto,
)
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.ports.tools import ToolResult
from steerable_bridge.runtime.turns.hooks import StepReport
from steerable_bridge.runtime.values import TextPart, ToolCall
from tests.runtime.harness import (
    assert_well_formed,
    kinds,
    make_agent,
    of,
    prompt,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def call(call_id: str, name: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def actions(events: list[ev.LoopEvent]) -> list[tuple[str, str]]:
    return [(e.hook, e.action) for e in of(events, ev.HookAction)]


async def test_pre_step_is_a_waterfall_and_its_request_is_what_gets_logged() -> None:
    seen_by_second: list[int] = []

    def drop_tools(request: ModelRequest, ctx: HookContext) -> ModelRequest:
        return replace(request, tools=())

    async def count(request: ModelRequest, ctx: HookContext) -> None:
        seen_by_second.append(len(request.tools))

    agent = make_agent(scripted({"text": "hello"}), tools=[text_tool()])
    agent.hooks.register(Hook(name="strip", pre_step=drop_tools))
    agent.hooks.register(Hook(name="count", pre_step=count))
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert seen_by_second == [0]
    assert of(seen, ev.ModelRequestEvent)[0].request.tools == ()
    assert actions(seen) == [("strip", "rewrite_request")]
    assert of(seen, ev.HookAction)[0].detail == "changed tools"
    assert_well_formed(seen)


async def test_pre_step_reject_ends_the_turn_before_the_model_is_called() -> None:
    agent = make_agent(scripted())  # no rounds: calling the model would fail the run
    agent.hooks.register(Hook(name="gate", pre_step=lambda r, c: Reject("office hours only")))
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert actions(seen) == [("gate", "reject")]
    assert of(seen, ev.HookAction)[0].detail == "office hours only"
    assert "model_request" not in kinds(seen)
    assert_well_formed(seen)


async def test_post_step_observes_each_model_call() -> None:
    reports: list[StepReport] = []
    agent = make_agent(
        scripted({"text": "look", "tool_calls": [call("c1", text="x")]}, {"text": "done"}),
        tools=[text_tool()],
    )
    agent.hooks.register(Hook(name="watch", post_step=lambda r, c: reports.append(r)))
    session = await agent.new_session("/w")
    await prompt(session)
    assert [(r.step, r.text, len(r.tool_calls), r.finish_reason) for r in reports] == [
        (1, "look", 1, "tool_calls"),
        (2, "done", 0, "end_turn"),
    ]
    assert actions(list(session.log.view())) == []  # observing changes nothing


async def test_before_tool_veto_means_no_start_no_permission_and_a_failed_result() -> None:
    def veto(call: ToolCall, ctx: HookContext) -> Veto | None:
        return Veto("writes are frozen") if call.name == "echo" else None

    agent = make_agent(
        scripted({"tool_calls": [call("c1", text="x")]}, {"text": "ok"}),
        tools=[text_tool(kind="edit")],
        approval="ask",
    )
    agent.hooks.register(Hook(name="freeze", before_tool=veto))
    session = await agent.new_session("/w")
    _, seen = await prompt(session)
    assert "tool_started" not in kinds(seen) and "permission_requested" not in kinds(seen)
    finished = of(seen, ev.ToolFinished)[0]
    assert finished.status == "failed" and finished.error is not None
    assert finished.error.code == "vetoed" and "writes are frozen" in finished.error.message
    action = of(seen, ev.HookAction)[0]
    assert (action.hook, action.action, action.call_id) == ("freeze", "veto", "c1")
    assert_well_formed(seen)


async def test_before_tool_rewrite_runs_the_new_arguments() -> None:
    agent = make_agent(
        scripted({"tool_calls": [call("c1", text="rm -rf /")]}, {"text": "ok"}),
        tools=[text_tool()],
    )
    agent.hooks.register(
        Hook(name="safe", before_tool=lambda c, x: Rewrite({"text": "ls"}, reason="sandboxed"))
    )
    session = await agent.new_session("/w")
    _, seen = await prompt(session)
    assert of(seen, ev.ToolFinished)[0].content == (TextPart(text="echo: ls"),)
    action = of(seen, ev.HookAction)[0]
    assert (action.action, action.detail, action.call_id) == (
        "rewrite_arguments",
        "sandboxed",
        "c1",
    )


async def test_after_tool_rewrites_what_the_model_sees() -> None:
    async def redact(call: ToolCall, result: ToolResult, ctx: HookContext) -> ToolResult:
        return ToolResult(content=(TextPart(text="[redacted]"),))

    agent = make_agent(
        scripted({"tool_calls": [call("c1", text="secret")]}, {"text": "ok"}),
        tools=[text_tool()],
    )
    agent.hooks.register(Hook(name="redact", after_tool=redact))
    session = await agent.new_session("/w")
    _, seen = await prompt(session)
    assert of(seen, ev.ToolFinished)[0].content == (TextPart(text="[redacted]"),)
    assert actions(seen) == [("redact", "rewrite_result")]
    tool_message = project_history(session.log.view())[2]
    assert tool_message.text == "[redacted]"


async def test_before_completion_retry_shows_the_model_a_message_and_is_bounded() -> None:
    drafts: list[str] = []

    def insist(draft: str, ctx: HookContext) -> Retry:
        drafts.append(draft)
        return Retry("Cite the file you used.", reason="no citation")

    agent = make_agent(scripted({"text": "one"}, {"text": "two"}, {"text": "three"}))
    agent.hooks.register(Hook(name="cite", before_completion=insist))
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert drafts == ["one", "two"]  # two retries (the default bound); the third is accepted
    assert actions(seen) == [("cite", "retry"), ("cite", "retry")]
    last_request = of(seen, ev.ModelRequestEvent)[-1].request
    assert [m.role for m in last_request.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert last_request.messages[-1].text == "Cite the file you used."
    assert_well_formed(seen)


async def test_before_completion_narrate_closes_tools_for_the_next_step() -> None:
    answers = iter([Narrate("say what you did"), Accept()])
    agent = make_agent(scripted({"text": ""}, {"text": "I read a file."}), tools=[text_tool()])
    agent.hooks.register(Hook(name="n", before_completion=lambda d, c: next(answers)))
    session = await agent.new_session("/w")
    _, seen = await prompt(session)
    first, second = (e.request for e in of(seen, ev.ModelRequestEvent))
    assert len(first.tools) == 1 and second.tools == ()
    assert actions(seen) == [("n", "narrate")]
    assert "what you did" in second.messages[-1].text


async def test_a_hook_that_raises_is_logged_and_changes_nothing() -> None:
    def broken(call: ToolCall, ctx: HookContext) -> None:
        raise RuntimeError("bug in hook")

    agent = make_agent(
        scripted({"tool_calls": [call("c1", text="x")]}, {"text": "ok"}), tools=[text_tool()]
    )
    agent.hooks.register(Hook(name="buggy", before_tool=broken))
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert of(seen, ev.ToolFinished)[0].status == "completed"
    action = of(seen, ev.HookAction)[0]
    assert action.action == "hook_error" and "bug in hook" in action.detail


async def test_a_session_scoped_hook_does_not_reach_other_sessions() -> None:
    agent = make_agent(scripted({"text": "a"}, {"text": "b"}))
    one = await agent.new_session("/w")
    other = await agent.new_session("/w")
    agent.hooks.register(
        Hook(name="only-one", pre_step=lambda r, c: Reject("no")), scope=agent.scope_of(one)
    )
    assert (await prompt(one))[1][-1].kind == "run_finished"
    _, seen = await prompt(other)
    assert actions(seen) == []
    assert "model_request" in kinds(seen)


async def test_a_hook_that_hangs_is_cut_off_and_logged() -> None:
    import anyio

    from steerable_bridge.runtime.turns.hooks import HookRunner

    async def hang(request: ModelRequest, ctx: HookContext) -> None:
        await anyio.sleep_forever()

    logged: list[dict[str, Any]] = []

    async def emit(cls: Any, /, **fields: Any) -> Any:
        logged.append(fields)

    runner = HookRunner(
        (Hook(name="slow", pre_step=hang),),
        emit,
        lambda: HookContext(session_id="s", run_id="r", step=1, model="m", cwd="/"),
        timeout_s=0.01,
    )
    request = ModelRequest(model="m", system="", messages=())
    assert await runner.pre_step(request) == request
    assert logged[0]["action"] == "hook_error" and "did not answer" in logged[0]["detail"]
