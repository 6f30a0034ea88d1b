"""`initialize` advertises what the agent port can do, and the agent refuses the rest.

A port whose engine drives another agent may not load, fork, list or steer (`runtime/ports/far.py`,
`PortInfo.can_*`); the ACP agent then leaves those capabilities out of `initialize` and
answers the methods with a refusal naming the remedy instead of pretending.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from acp import RequestError

from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.ports.port import PortInfo
from steerable_bridge.runtime.turns.loop import run_turn
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.transports.acp.agent import AcpAgent
from tests.runtime.harness import make_agent, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Limited:
    """A turn engine (our own loop) whose far side can neither fork nor list nor steer."""

    async def __call__(self, ctx: TurnContext, turn: TurnInput) -> RunOutcome:
        return await run_turn(ctx, turn)

    def describe(self, info: PortInfo) -> PortInfo:
        return replace(info, can_fork=False, can_list=False, can_steer=False)


def _agent(engine: Any = None) -> AcpAgent:
    agent = make_agent(scripted({"text": "hi"}, loop=True))
    agent.engine = engine
    return AcpAgent(LocalPort(agent), spawn=lambda task: None)


async def test_initialize_offers_only_what_the_port_can_do() -> None:
    full = (await _agent().initialize(protocol_version=1)).agent_capabilities
    limited = (await _agent(Limited()).initialize(protocol_version=1)).agent_capabilities
    assert full is not None and limited is not None
    assert full.session_capabilities is not None and limited.session_capabilities is not None
    assert full.session_capabilities.fork and full.session_capabilities.list
    assert limited.load_session and limited.session_capabilities.resume  # it still can load
    assert limited.session_capabilities.fork is None
    assert limited.session_capabilities.list is None
    assert "steer" in (full.field_meta or {})["steerable"]
    own = (limited.field_meta or {})["steerable"]
    assert "steer" not in own and "follow_up" not in own and "events" in own


async def test_what_is_not_offered_is_refused_with_a_remedy() -> None:
    agent = _agent(Limited())
    with pytest.raises(RequestError) as refused:
        await agent.fork_session(cwd="/tmp", session_id="s1")
    assert refused.value.data["code"] == "not_supported"
    assert "session/fork" in str(refused.value) and "new session" in str(refused.value)
    with pytest.raises(RequestError):
        await agent.list_sessions()


async def test_the_port_itself_refuses_a_fork_it_does_not_offer() -> None:
    agent = make_agent(scripted({"text": "hi"}, loop=True))
    agent.engine = Limited()
    port = LocalPort(agent)
    source = await port.open("/tmp")
    with pytest.raises(RouteError) as refused:
        await port.fork(source.conversation_id, "/tmp")
    assert refused.value.code == "fork_unsupported"
    assert len((await LocalPort(agent).list()).records) == 1  # no half-made copy was left
