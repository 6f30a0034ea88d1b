"""The bridge driving an ACP agent that is not ours (`foreign_agent.py`), in process: our
`Agent(engine=AcpBridge)` behind `LocalPort`, as `serve --acp-agent` composes it."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.turns.turn import ResumeDecision, TurnInput
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp.bridge import (
    ROUTE_PROVIDER,
    SESSION_OPTION,
    AcpBridge,
    BridgedAgentRoute,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(60)]

AGENT = Path(__file__).with_name("foreign_agent.py")


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[LocalPort]:
    bridge = AcpBridge([sys.executable, str(AGENT)], cwd=str(tmp_path), name="foreign")
    router = ModelRouter()
    router.register(ROUTE_PROVIDER, BridgedAgentRoute)
    route = f"{ROUTE_PROVIDER}:foreign"
    agent = Agent(
        router=router, store=MemoryStore(), config=AgentConfig(model=route), engine=bridge
    )
    async with bridge.running():
        local = LocalPort(agent)
        yield local
        await local.aclose()


async def run(port: LocalPort, conversation: str, turn: TurnInput) -> list[LoopEvent]:
    seen: list[LoopEvent] = []

    async def sink(event: LoopEvent) -> None:
        seen.append(event)

    with anyio.fail_after(30):
        outcome = await port.prompt(conversation, turn, sink)
    assert outcome.final_event is seen[-1]
    return seen


def text(events: list[LoopEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ev.TextDelta))


async def test_a_foreign_agent_is_bridged_with_its_requests_answered_and_refused(
    port: LocalPort, tmp_path: Path
) -> None:
    conversation = (await port.open(str(tmp_path))).conversation_id
    first = await run(port, conversation, TurnInput(content=(TextPart(text="clean up"),)))
    # a vendor extension gets "method not found" at once; fs without a workspace is refused
    assert "vendor: error -32601" in text(first)
    assert "fs: error -32010 no_workspace" in text(first)
    asked = [e for e in first if isinstance(e, ev.PermissionRequested)]
    assert [(e.call_id, e.tool_name) for e in asked] == [("x1", "Delete cache")]
    assert [o.option_id for o in asked[0].options] == ["yes", "no"]
    end = first[-1]
    assert isinstance(end, ev.RunFinished) and end.stop_reason == "interrupted"
    assert [i.id for i in end.interrupts] == ["approval-x1"]
    call = next(e for e in first if isinstance(e, ev.ToolCallEnd))
    assert (call.tool_kind, call.arguments_json) == ("delete", '{"path":"cache"}')
    info = [e for e in first if isinstance(e, ev.ConfigChanged) and e.option_id == SESSION_OPTION]
    assert [e.value for e in info] == ["foreign-1"]

    second = await run(
        port, conversation, TurnInput(resume=(ResumeDecision(call_id="x1", approved=True),))
    )
    resolved = next(e for e in second if isinstance(e, ev.PermissionResolved))
    assert (resolved.outcome, resolved.option_id) == ("allow_once", "yes")
    finished = next(e for e in second if isinstance(e, ev.ToolFinished))
    assert finished.status == "completed"
    assert text(second) == "permission: yes"
    end = second[-1]
    assert isinstance(end, ev.RunFinished) and end.stop_reason == "end_turn"
    assert end.usage.prompt_tokens == 7

    # the command list it sent after session/new, before any prompt, was recorded too
    logged = await port.events_after(conversation)
    commands = [e for e in logged if isinstance(e, ev.CommandsUpdated)]
    assert commands and commands[0].commands[0].name == "review"


async def test_a_rejection_answers_the_agents_own_reject_option(
    port: LocalPort, tmp_path: Path
) -> None:
    conversation = (await port.open(str(tmp_path))).conversation_id
    await run(port, conversation, TurnInput(content=(TextPart(text="clean up"),)))
    second = await run(
        port, conversation, TurnInput(resume=(ResumeDecision(call_id="x1", approved=False),))
    )
    resolved = next(e for e in second if isinstance(e, ev.PermissionResolved))
    assert (resolved.outcome, resolved.option_id) == ("reject_once", "no")
    assert text(second) == "permission: no"
    finished = next(e for e in second if isinstance(e, ev.ToolFinished))
    assert finished.status == "failed"


async def test_earlier_messages_logged_between_runs_open_the_next_prompt(
    port: LocalPort, tmp_path: Path
) -> None:
    conversation = (await port.open(str(tmp_path))).conversation_id
    earlier = ev.UserMessage(
        session_id="", run_id="", seq=-1, ts=0, message_id="u0", content=(TextPart(text="one"),)
    )
    await port.record(conversation, earlier)  # as the AG-UI server logs a request's earlier ones
    events = await run(port, conversation, TurnInput(content=(TextPart(text="two"),)))
    assert text(events).startswith("heard: one / two\n")


async def test_after_the_agent_restarts_its_session_is_loaded_without_logging_the_replay(
    tmp_path: Path,
) -> None:
    bridge = AcpBridge(
        [sys.executable, str(AGENT)],
        cwd=str(tmp_path),
        name="foreign",
        env={**os.environ, "FOREIGN_LOAD": "1"},
    )
    router = ModelRouter()
    router.register(ROUTE_PROVIDER, BridgedAgentRoute)
    config = AgentConfig(model=f"{ROUTE_PROVIDER}:foreign")
    agent = Agent(router=router, store=MemoryStore(), config=config, engine=bridge)
    async with bridge.running():
        port = LocalPort(agent)
        conversation = (await port.open(str(tmp_path))).conversation_id
        go = TurnInput(content=(TextPart(text="go"),))
        await run(port, conversation, go)
        await run(
            port, conversation, TurnInput(resume=(ResumeDecision(call_id="x1", approved=True),))
        )
        first = (await bridge.child.ready()).incarnation
        bridge.child.kill()
        with anyio.fail_after(30):
            while (await bridge.child.ready()).incarnation == first:  # noqa: ASYNC110 - no event tells a restart
                await anyio.sleep(0.05)
        events = await run(port, conversation, go)
        await port.aclose()
    assert "an old answer" not in text(events)  # the replay of what we logged before
    assert not any(isinstance(e, ev.PlanUpdated) for e in events)
    assert not any(isinstance(e, ev.HookAction) for e in events)  # the same agent session
    commands = [e for e in events if isinstance(e, ev.CommandsUpdated)]
    assert [c.commands[0].name for c in commands] == ["resumed"]
    assert text(events).startswith("heard: go")
