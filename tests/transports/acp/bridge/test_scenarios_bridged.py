"""The conformance scenarios played over AG-UI twice — against our runtime, and against
`steerable-bridge acp` (same script, same tools) behind the ACP bridge — tell one story:
the same answers, tool calls, results, permission outcomes, plans and stop reasons.

The bridged log cannot be identical: ACP does not carry model requests or steps, and ids,
seqs and chunk boundaries are the child's; `story` keeps what a user sees.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.conformance import scenario_tools
from steerable_bridge.conformance.decode_agui import AguiDecoder
from steerable_bridge.conformance.live import AguiExchange, _turn, run_agui
from steerable_bridge.conformance.scenarios import Scenario, load_scenarios, quality_json
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp.bridge import ROUTE_PROVIDER, AcpBridge, BridgedAgentRoute
from steerable_bridge.transports.agui.app import create_app
from tests.prompt_server import PromptServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(120)]

NAMES = (
    "plain_chat",
    "reasoning",
    "one_tool",
    "parallel_tools",
    "tool_error",
    "unknown_tool",
    "plan_updates",
    "max_steps",
    "cancel_mid_stream",
    "cancel_mid_tool",
    "steering",
    "provider_failure",
    "quality_budget",
    "quality_recovery_dedup",
    "quality_soft_timeout",
    "compaction_manual",
    "agui_question_resume",
    "agui_question_url_resume",
)


def story(events: list[LoopEvent]) -> list[tuple[Any, ...]]:
    """What a user sees of a log: answers, calls, results, permissions, plans, the ending."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, ev.TextDelta | ev.ReasoningDelta):
            kind = "text" if isinstance(e, ev.TextDelta) else "thought"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + e.delta)
            else:
                out.append((kind, e.delta))
        elif isinstance(e, ev.ToolCallEnd):
            out.append(("call", e.name, json.loads(e.arguments_json or "{}")))
        elif isinstance(e, ev.ToolFinished):
            text = "".join(p.text for p in e.content if isinstance(p, TextPart))
            out.append(("result", e.status, text))
        elif isinstance(e, ev.PermissionResolved):
            out.append(("permission", e.outcome))
        elif isinstance(e, ev.QuestionAnswered):
            out.append(("question", e.action, e.content_json))
        elif isinstance(e, ev.QuestionCompleted):
            out.append(("completed", e.question_id))
        elif isinstance(e, ev.PlanUpdated):
            out.append(("plan", e.entries))
        elif isinstance(e, ev.RunFinished):
            out.append(("end", e.stop_reason))
        elif isinstance(e, ev.RunFailed):
            out.append(("failed", e.code))
    return out


@asynccontextmanager
async def bridged_server(scenario: Scenario, folder: Path) -> AsyncIterator[tuple[str, Agent]]:
    script = folder / "script.json"
    script.write_text(scenario.script.model_dump_json(), encoding="utf-8")
    argv = [
        sys.executable, "-m", "steerable_bridge", "acp",
        "--model", f"scripted:{script}", "--approve", "ask", "--storage", "memory",
        "--max-steps", str(scenario.max_steps), "--quality", quality_json(scenario.quality),
        "--tools-module", str(scenario_tools.__file__),
    ]  # fmt: skip
    env = {**os.environ, "STEERABLE_DEMO_PACE_MS": "0"}
    bridge = AcpBridge(argv, cwd=str(folder), env=env, name="scenario")
    router = ModelRouter()
    router.register(ROUTE_PROVIDER, BridgedAgentRoute)
    config = AgentConfig(model=f"{ROUTE_PROVIDER}:scenario", approval="ask")
    agent = Agent(router=router, store=MemoryStore(), config=config, engine=bridge)
    app = create_app(LocalPort(agent), cwd=str(folder))
    server = PromptServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    async with bridge.running(), anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/agent", agent
        finally:
            server.should_exit = True
            await agent.aclose()


async def bridged_log(scenario: Scenario, folder: Path) -> list[LoopEvent]:
    thread_id = f"thread-{scenario.name}"
    exchanges: list[AguiExchange] = []
    with anyio.fail_after(90):
        async with (
            bridged_server(scenario, folder) as (url, agent),
            httpx.AsyncClient(timeout=httpx.Timeout(60)) as client,
        ):
            decoder = AguiDecoder()  # the thread's streams in order: what requests refer to
            for index, turn in enumerate(scenario.turns):
                await _turn(client, url, thread_id, index, turn, exchanges, decoder)
            session = agent.get(thread_id)
            assert session is not None
            while session.running:  # noqa: ASYNC110 - a session has no idle event to wait on
                await anyio.sleep(0.01)
            return list(session.log.view())


@pytest.mark.parametrize("name", NAMES)
async def test_a_scenario_through_the_bridge_tells_the_native_story(
    name: str, tmp_path: Path
) -> None:
    (scenario,) = load_scenarios([name])
    native = await run_agui(scenario)
    bridged = await bridged_log(scenario, tmp_path)
    assert story(bridged) == story(native.log)
