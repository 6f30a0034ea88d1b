"""The data of one turn (`runtime/turns/turn.py`): a `TurnInput` may be empty (a run that only
answers open calls) and logs only the client run ids it was given; the values a transport
builds are frozen; `LoopSettings` bounds every wait with its defaults; a `TurnEngine`
given to the agent runs the session's turns through the same `TurnContext` (log, facts,
sink, cancel token), and the session hands back the run's final event it logged."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.turns.turn import (
    ClientToolResult,
    LoopSettings,
    ResumeDecision,
    RunOutcome,
    TurnContext,
    TurnInput,
)
from steerable_bridge.runtime.values import TextPart, Usage
from tests.runtime.harness import prompt, scripted


def test_an_empty_turn_input_is_allowed_and_logs_no_client_ids() -> None:
    turn = TurnInput()
    assert turn.content == () and turn.tool_results == () and turn.resume == ()
    assert not turn.compact and turn.run_started_fields() == {}


def test_only_the_client_run_ids_given_are_logged() -> None:
    assert TurnInput(client_run_id="r7").run_started_fields() == {"client_run_id": "r7"}
    both = TurnInput(client_run_id="r7", parent_run_id="r6").run_started_fields()
    assert both == {"client_run_id": "r7", "parent_run_id": "r6"}


@pytest.mark.parametrize(
    "value",
    [
        TurnInput(),
        ClientToolResult(call_id="c1", content=()),
        ResumeDecision(call_id="c1", approved=True),
        LoopSettings(),
        RunOutcome(run_id="r", stop_reason="end_turn", usage=Usage()),
    ],
    ids=lambda value: type(value).__name__,
)
def test_what_a_transport_builds_is_frozen(value: Any) -> None:
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


def test_a_resume_decision_neither_stops_nor_remembers_unless_asked() -> None:
    decision = ResumeDecision(call_id="c1", approved=False)
    assert not decision.stop and not decision.always


def test_the_loop_settings_defaults_bound_every_wait() -> None:
    settings = LoopSettings()
    assert settings.max_steps == 25
    assert (settings.model_timeout_s, settings.permission_timeout_s) == (300.0, 300.0)
    assert settings.commit_interval_s == 0.25
    assert settings.new_id("run") == "run"  # the agent's config supplies a unique one


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_turn_engine_runs_the_turn_through_the_sessions_context() -> None:
    given: list[tuple[TurnContext, TurnInput]] = []

    async def engine(ctx: TurnContext, turn: TurnInput) -> RunOutcome:
        given.append((ctx, turn))
        steps: list[tuple[type[ev.EventBase], dict[str, Any]]] = [
            (ev.RunStarted, {"model": ctx.model}),
            (ev.RunFinished, {"stop_reason": "end_turn"}),
        ]
        for cls, fields in steps:
            event: Any = ctx.log.record(cls, "run_x", **fields)
            ctx.facts.observe(event)
            assert ctx.sink is not None
            await ctx.sink(event)
        return RunOutcome(run_id="run_x", stop_reason="end_turn", usage=Usage())

    router = ModelRouter()
    router.register("test", lambda name: scripted({"text": "unused"}))
    agent = Agent(
        router=router, store=MemoryStore(), config=AgentConfig(model="test:m"), engine=engine
    )
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session, "do it")
    ((ctx, turn),) = given
    assert ctx.log is session.log and ctx.facts is session.facts and ctx.cwd == "/w"
    assert turn.content == (TextPart(text="do it"),)
    assert [e.kind for e in seen] == ["run_started", "run_finished"]
    assert outcome.final_event == seen[-1]  # the session found the run's closing event
    assert not session.facts.running
