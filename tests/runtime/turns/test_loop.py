"""The turn / step loop, driven through real sessions with scripted models and tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.registry import PromptSection
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    TextChunk,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import TextPart, Usage
from tests.runtime.harness import (
    assert_well_formed,
    call,
    index,
    kinds,
    make_agent,
    new_session,
    of,
    prompt,
    requests,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


# -- logging and streaming ------------------------------------------------------------------


class ProbeProvider:
    """Records what the session log held at the moment the provider was called."""

    def __init__(self) -> None:
        self.session: Session | None = None
        self.log_at_start: list[ev.LoopEvent] = []
        self.request: ModelRequest | None = None

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(route="test:probe")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        assert self.session is not None
        self.log_at_start = list(self.session.log.view())
        self.request = request
        yield TextChunk(delta="ok")
        yield ModelResponse(finish_reason="end_turn")


async def test_the_full_request_is_logged_before_the_provider_starts() -> None:
    probe = ProbeProvider()
    session = await new_session(probe, tools=[text_tool()])
    probe.session = session
    outcome, _ = await prompt(session, "hello")
    assert outcome.stop_reason == "end_turn"
    last = probe.log_at_start[-1]
    assert isinstance(last, ev.ModelRequestEvent)
    assert last.request == probe.request
    assert [t.name for t in last.request.tools] == ["echo"]
    assert last.request.messages[-1].text == "hello"
    assert kinds(probe.log_at_start)[:2] == ["run_started", "user_message"]


async def test_every_chunk_is_kept_and_the_sink_sees_exactly_the_log() -> None:
    model = scripted(
        {
            "reasoning": "abcdefgh",
            "text": "hello world",
            "chunk_size": 3,
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "cached_tokens": 2},
        }
    )
    session = await new_session(model)
    outcome, seen = await prompt(session)
    assert seen == list(session.log.view())
    assert [e.delta for e in of(seen, ev.ReasoningDelta)] == ["abc", "def", "gh"]
    assert [e.delta for e in of(seen, ev.TextDelta)] == ["hel", "lo ", "wor", "ld"]
    assert kinds(seen) == [
        "run_started",
        "user_message",
        "session_info",
        "step_started",
        "model_request",
        "reasoning_start",
        *["reasoning_delta"] * 3,
        "reasoning_end",
        "text_start",
        *["text_delta"] * 4,
        "text_end",
        "model_response",
        "usage_updated",
        "step_finished",
        "run_finished",
    ]
    assert outcome.usage == Usage(prompt_tokens=9, completion_tokens=4, cached_tokens=2)
    assert of(seen, ev.RunFinished)[0].usage == outcome.usage
    assert of(seen, ev.SessionInfo)[0].title == "hi"
    assert_well_formed(seen)
    (_, assistant) = project_history(session.log.view())
    assert (assistant.text, assistant.reasoning) == ("hello world", "abcdefgh")


async def test_a_tool_call_is_logged_from_stream_to_result_and_the_model_sees_it() -> None:
    model = scripted(
        {"text": "Let me echo.", "tool_calls": [call("c1", text="ping")], "chunk_size": 5},
        {"text": "Done."},
    )
    session = await new_session(model, tools=[text_tool()])
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    start = of(seen, ev.ToolCallStart)[0]
    assert (start.call_id, start.name) == ("c1", "echo")
    assert start.parent_message_id == of(seen, ev.TextStart)[0].message_id
    deltas = [e.delta for e in of(seen, ev.ToolCallDelta)]
    assert len(deltas) > 1 and "".join(deltas) == '{"text":"ping"}'
    end = of(seen, ev.ToolCallEnd)[0]
    assert (end.arguments_json, end.tool_kind, end.title) == (
        '{"text":"ping"}',
        "read",
        "Echo: ping",
    )
    finished = of(seen, ev.ToolFinished)[0]
    assert finished.status == "completed"
    assert finished.content == (TextPart(text="echo: ping"),)
    order = kinds(seen)
    assert (
        order.index("tool_call_end")
        < order.index("model_response")
        < order.index("tool_started")
        < order.index("tool_finished")
    )
    second = requests(session)[1]
    assert second.messages[-2].tool_calls[0].call_id == "c1"
    assert second.messages[-1].role == "tool" and second.messages[-1].text == "echo: ping"
    assert_well_formed(seen)


async def test_multi_step_turn_sums_usage_and_numbers_steps() -> None:
    model = scripted(
        {
            "tool_calls": [call("c1", text="a")],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        },
        {
            "tool_calls": [call("c2", text="b")],
            "usage": {"prompt_tokens": 20, "completion_tokens": 6},
        },
        {"text": "ok", "usage": {"prompt_tokens": 30, "completion_tokens": 7}},
    )
    session = await new_session(model, tools=[text_tool()])
    outcome, seen = await prompt(session)
    assert [e.step for e in of(seen, ev.StepStarted)] == [1, 2, 3]
    assert [e.finish_reason for e in of(seen, ev.StepFinished)] == [
        "tool_calls",
        "tool_calls",
        "end_turn",
    ]
    assert outcome.usage == Usage(prompt_tokens=60, completion_tokens=18)
    assert [m.role for m in requests(session)[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert_well_formed(seen)


async def test_unknown_tool_becomes_an_error_the_model_sees_next_step() -> None:
    model = scripted({"tool_calls": [call("c1", name="nope", text="x")]}, {"text": "sorry"})
    session = await new_session(model, tools=[text_tool()])
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    finished = of(seen, ev.ToolFinished)[0]
    assert finished.status == "failed"
    assert finished.error is not None and finished.error.code == "unknown_tool"
    assert "echo" in finished.error.message  # names the tools that do exist
    result = requests(session)[1].messages[-1]
    assert result.role == "tool" and result.is_error and "nope" in result.text
    assert_well_formed(seen)


@pytest.mark.parametrize(
    ("arguments", "code", "needle"),
    [
        ({"arguments_text": '{"text": "unterminated'}, "model_protocol_error", "not a JSON object"),
        ({}, "invalid_arguments", "text"),
    ],
)
async def test_invalid_arguments_never_reach_the_handler(
    arguments: dict[str, Any], code: str, needle: str
) -> None:
    ran: list[dict[str, Any]] = []

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args)
        return ToolResult()

    tool = Tool(
        name="echo",
        description="",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        kind="read",
        handler=handler,
    )
    model = scripted({"tool_calls": [{"id": "c1", "name": "echo", **arguments}]}, {"text": "ok"})
    session = await new_session(model, tools=[tool])
    _, seen = await prompt(session)
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == code
    assert needle in error.message
    assert ran == []
    assert requests(session)[1].messages[-1].is_error


async def test_tool_exceptions_become_structured_errors() -> None:
    async def broken(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")

    async def refusing(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolFailure("not_found", "no such file; list the directory first")

    tools = [
        Tool(name="broken", description="", kind="read", handler=broken),
        Tool(name="refusing", description="", kind="read", handler=refusing),
    ]
    model = scripted({"tool_calls": [call("c1", "broken"), call("c2", "refusing")]}, {"text": "k"})
    session = await new_session(model, tools=tools)
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    first, second = of(seen, ev.ToolFinished)
    assert first.error is not None and first.error.code == "tool_exception"
    assert "disk on fire" in first.error.message
    assert second.error is not None and second.error.code == "not_found"
    assert second.error.message == "no such file; list the directory first"


async def test_max_steps_ends_the_turn_and_keeps_every_event() -> None:
    model = scripted({"tool_calls": [call("c", text="again")]}, loop=True)
    session = await new_session(model, tools=[text_tool()], max_steps=3)
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "max_steps"
    assert len(of(seen, ev.StepStarted)) == 3
    assert len(of(seen, ev.ToolFinished)) == 3
    budget = of(seen, ev.BudgetExhausted)[0]
    assert (budget.budget, budget.limit, budget.used) == ("steps", 3, 3)
    assert of(seen, ev.RunFinished)[0].stop_reason == "max_steps"
    assert seen == list(session.log.view())
    assert_well_formed(seen)


async def test_a_tool_registered_during_a_step_is_offered_from_the_next_step_only() -> None:
    session: Session | None = None

    async def install(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert session is not None
        session.agent.tools.register(text_tool("late"))
        session.agent.prompts.register(PromptSection(name="extra", text="Extra rule."))
        return ToolResult(content=(TextPart(text="installed"),))

    installer = Tool(name="install", description="", kind="read", handler=install)
    model = scripted(
        {"tool_calls": [call("c1", "install"), call("c2", "late", text="too early")]},
        {"tool_calls": [call("c3", "late", text="now")]},
        {"text": "done"},
    )
    session = await new_session(model, tools=[installer])
    _, seen = await prompt(session)
    first, second, _ = requests(session)
    assert [t.name for t in first.tools] == ["install"]
    assert "Extra rule." not in first.system
    assert [t.name for t in second.tools] == ["install", "late"]
    assert second.system.endswith("Extra rule.")
    results = {e.call_id: e for e in of(seen, ev.ToolFinished)}
    assert results["c2"].error is not None and results["c2"].error.code == "unknown_tool"
    assert results["c3"].status == "completed"


async def test_parallel_safe_calls_overlap_but_results_keep_call_order() -> None:
    running = 0
    peak = 0
    finished_order: list[str] = []

    def slow(name: str, delay: float) -> Tool:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await anyio.sleep(delay)
            running -= 1
            finished_order.append(name)
            return ToolResult(content=(TextPart(text=name),))

        return Tool(name=name, description="", kind="read", handler=handler, parallel_safe=True)

    tools = [slow("a", 0.15), slow("b", 0.05), slow("c", 0.0)]
    model = scripted(
        {"tool_calls": [call("1", "a"), call("2", "b"), call("3", "c")]}, {"text": "ok"}
    )
    session = await new_session(model, tools=tools)
    _, seen = await prompt(session)
    assert peak == 3
    assert finished_order == ["c", "b", "a"]
    assert [e.call_id for e in of(seen, ev.ToolFinished)] == ["1", "2", "3"]
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["1", "2", "3"]
    assert kinds(seen).index("tool_finished") > max(
        i for i, k in enumerate(kinds(seen)) if k == "tool_started"
    )


async def test_calls_that_are_not_parallel_safe_run_one_after_another() -> None:
    running = 0
    peak = 0

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.02)
        running -= 1
        return ToolResult()

    tool = Tool(name="serial", description="", kind="read", handler=handler)
    model = scripted({"tool_calls": [call("1", "serial"), call("2", "serial")]}, {"text": "ok"})
    session = await new_session(model, tools=[tool])
    _, seen = await prompt(session)
    assert peak == 1
    assert kinds(seen).count("tool_finished") == 2


# -- cancellation ---------------------------------------------------------------------------


async def run_and_cancel(
    session: Session, when: Any, text: str = "go"
) -> tuple[Any, list[ev.LoopEvent]]:
    """Start a turn, cancel it once `when(event)` holds (or `when` is an Event that fires)."""
    result: list[Any] = []
    trigger = anyio.Event()

    def watch(event: ev.LoopEvent) -> None:
        if callable(when) and when(event):
            trigger.set()

    async def run() -> None:
        result.append(await prompt(session, text, on_event=watch))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await (when if isinstance(when, anyio.Event) else trigger).wait()
            assert session.cancel("test cancel")
    return result[0]


async def test_cancel_mid_stream_closes_text_and_half_streamed_calls() -> None:
    model = scripted(
        {
            "text": "partial answer",
            "tool_calls": [call("c1", text="x")],
            "chunk_size": 4,
            "hang": True,
        }
    )
    session = await new_session(model, tools=[text_tool()])
    outcome, seen = await run_and_cancel(session, lambda e: isinstance(e, ev.ToolCallDelta))
    assert outcome.stop_reason == "cancelled"
    assert of(seen, ev.RunFinished)[0].stop_reason == "cancelled"
    result = of(seen, ev.ToolFinished)[0]
    assert (result.call_id, result.status) == ("c1", "cancelled")
    assert of(seen, ev.ToolStarted) == []  # the half-streamed call never ran
    assert "".join(e.delta for e in of(seen, ev.TextDelta)) == "partial answer"
    assert_well_formed(seen)
    assert not session.running
    assert session.facts.open_calls == {}


async def test_cancel_mid_tool_stops_it_and_answers_every_call() -> None:
    started = anyio.Event()
    stopped: list[bool] = []

    async def forever(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(True)
        return ToolResult()

    tools = [Tool(name="wait", description="", kind="read", handler=forever), text_tool()]
    model = scripted({"tool_calls": [call("c1", "wait"), call("c2", text="never")]}, {"text": "x"})
    session = await new_session(model, tools=tools)
    outcome, seen = await run_and_cancel(session, started)
    assert outcome.stop_reason == "cancelled"
    assert stopped == [True]
    results = {e.call_id: e.status for e in of(seen, ev.ToolFinished)}
    assert results == {"c1": "cancelled", "c2": "cancelled"}
    assert [e.call_id for e in of(seen, ev.ToolStarted)] == ["c1"]
    assert len(of(seen, ev.ModelRequestEvent)) == 1  # no further model call after cancel
    assert_well_formed(seen)
    # The session is usable again, and the model sees the cancelled calls as answered.
    model_next = await prompt(session, "again")
    assert model_next[0].stop_reason == "end_turn"
    last_request = requests(session)[-1]
    assert [m.role for m in last_request.messages[-4:]] == ["assistant", "tool", "tool", "user"]


# -- steering and follow-up -----------------------------------------------------------------


async def test_steering_is_injected_at_the_next_step_boundary() -> None:
    session: Session | None = None

    async def steer_now(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert session is not None and session.steer((TextPart(text="use tabs"),))
        return ToolResult(content=(TextPart(text="first"),))

    tools = [Tool(name="steer", description="", kind="read", handler=steer_now), text_tool()]
    model = scripted(
        {"tool_calls": [call("c1", "steer"), call("c2", text="second")]},
        {"text": "ok, tabs"},
    )
    session = await new_session(model, tools=tools)
    _, seen = await prompt(session)
    order = kinds(seen)
    steer_at = order.index("steer_applied")
    last_result = max(i for i, k in enumerate(order) if k == "tool_finished")
    second_request = [i for i, k in enumerate(order) if k == "model_request"][1]
    assert last_result < steer_at < second_request  # after the whole batch, before the model
    assert of(seen, ev.SteerApplied)[0].content == (TextPart(text="use tabs"),)
    messages = requests(session)[1].messages
    assert [m.role for m in messages[-4:]] == ["assistant", "tool", "tool", "user"]
    assert messages[-1].text == "use tabs"
    assert not session.steer((TextPart(text="late"),))  # idle sessions refuse steering


async def test_follow_up_waits_until_the_turn_would_end() -> None:
    session: Session | None = None

    async def queue_follow_up(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert session is not None and session.follow_up((TextPart(text="and then?"),))
        return ToolResult(content=(TextPart(text="queued"),))

    tool = Tool(name="queue", description="", kind="read", handler=queue_follow_up)
    model = scripted(
        {"tool_calls": [call("c1", "queue")]},
        {"text": "first answer"},
        {"text": "second answer"},
    )
    session = await new_session(model, tools=[tool])
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    order = kinds(seen)
    follow = order.index("follow_up_applied")
    # Not taken after the tool step (the model had more to say), only after the text step.
    step_ends = [i for i, k in enumerate(order) if k == "step_finished"]
    assert step_ends[1] < follow < [i for i, k in enumerate(order) if k == "model_request"][2]
    assert len(of(seen, ev.StepStarted)) == 3
    third = requests(session)[2].messages
    assert (third[-2].text, third[-1].role, third[-1].text) == ("first answer", "user", "and then?")
    assert_well_formed(seen)


# -- provider contract ----------------------------------------------------------------------


@pytest.mark.parametrize("violation", ["no_response", "chunk_after_response", "two_responses"])
async def test_a_provider_breaking_the_one_response_rule_fails_the_run(violation: str) -> None:
    model = scripted({"text": "partial", "violation": violation})
    session = await new_session(model)
    outcome, seen = await prompt(session)
    assert outcome.stop_reason is None
    assert outcome.error_code == "provider_protocol"
    failed = of(seen, ev.RunFailed)[0]
    assert failed.code == "provider_protocol" and failed.message
    assert of(seen, ev.RunFinished) == []
    assert_well_formed(seen)
    # Nothing is invented: the model's history holds only what was actually streamed.
    assistant_texts = [m.text for m in project_history(session.log.view()) if m.role == "assistant"]
    assert assistant_texts in ([], ["partial"])


async def test_a_provider_error_fails_the_run_with_its_code_and_remedy() -> None:
    model = scripted(
        {"text": "so far", "error": {"code": "rate_limited", "message": "wait a minute"}}
    )
    session = await new_session(model)
    outcome, seen = await prompt(session)
    assert (outcome.error_code, outcome.error_message) == ("rate_limited", "wait a minute")
    failed = of(seen, ev.RunFailed)[0]
    assert (failed.code, failed.message) == ("rate_limited", "wait a minute")
    assert of(seen, ev.StepFinished)[0].finish_reason == "error"
    assert_well_formed(seen)
    assert index(seen, lambda e: isinstance(e, ev.TextEnd)) < len(seen) - 1


async def test_steering_during_the_final_answer_gets_another_step_in_the_same_turn() -> None:
    model = scripted({"text": "done", "chunk_size": 2}, {"text": "switched"})
    session = await new_session(model)
    steered: list[bool] = []

    def steer_once(event: ev.LoopEvent) -> None:
        if isinstance(event, ev.TextDelta) and not steered:
            steered.append(session.steer((TextPart(text="actually, in French"),)))

    outcome, seen = await prompt(session, on_event=steer_once)
    assert steered == [True] and outcome.stop_reason == "end_turn"
    order = kinds(seen)
    assert order.index("step_finished") < order.index("steer_applied")
    assert len(of(seen, ev.StepStarted)) == 2
    assert requests(session)[1].messages[-1].text == "actually, in French"
    assert len(session.steering) == 0  # nothing left over for the next turn
    assert_well_formed(seen)


async def test_a_tool_that_overruns_its_timeout_is_stopped_and_reported() -> None:
    async def stuck(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await anyio.sleep_forever()
        return ToolResult()

    tool = Tool(name="stuck", description="", kind="read", handler=stuck, timeout_s=0.05)
    model = scripted({"tool_calls": [call("c1", "stuck")]}, {"text": "it timed out"})
    session = await new_session(model, tools=[tool])
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == "tool_timeout" and "0.05s" in error.message
    assert requests(session)[1].messages[-1].is_error


async def test_a_stalled_model_is_bounded_by_the_model_timeout() -> None:
    model = scripted({"text": "thinking", "hang": True})
    agent = make_agent(model, model_timeout_s=0.1)
    session = await agent.new_session("/work")
    outcome, seen = await prompt(session)
    assert outcome.error_code == "model_timeout"
    assert "0.1s" in (outcome.error_message or "")
    assert_well_formed(seen)
