"""The far-agent protocols (`runtime/ports/far.py`): an engine says what its far agent decides by
implementing `Describes`, `Settles` or `ListsFar` — whole, since a partial one is none of
them — and the port then defers to it: `describe` shapes the port's info, `set_mode` /
`set_option` go to the far agent with the conversation as a `FarConversation` (its ids,
folder, logged settings, mode, and a way to log in it), and `list` shows the far agent's
own sessions after the port's, leaving out those a conversation is mapped to."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.far import (
    Describes,
    FarConversation,
    FarPage,
    ListsFar,
    Settles,
)
from steerable_bridge.runtime.ports.port import PortInfo
from steerable_bridge.runtime.ports.storage import SessionRecord
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import Usage
from tests.runtime.harness import make_agent, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class FarEngine:
    """A turn engine whose far agent has its own modes, options and sessions."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, FarConversation, Any]] = []

    async def __call__(self, ctx: TurnContext, turn: TurnInput) -> RunOutcome:
        return RunOutcome(run_id="r", stop_reason="end_turn", usage=Usage())

    def describe(self, info: PortInfo) -> PortInfo:
        return dataclasses.replace(info, can_fork=False, modes=(("plan", "Plan", "Plan only"),))

    async def set_mode(self, conversation: FarConversation, mode_id: str) -> LoopEvent | None:
        self.asked.append(("mode", conversation, mode_id))
        if mode_id != "plan":
            raise ValueError(f"the far agent has no mode {mode_id!r}; modes: plan")
        return await conversation.record(ev.ModeChanged, mode_id=mode_id)

    async def set_option(
        self, conversation: FarConversation, option_id: str, value: Any
    ) -> LoopEvent | None:
        self.asked.append(("option", conversation, (option_id, value)))
        return await conversation.record(ev.ConfigChanged, option_id=option_id, value=str(value))

    async def list_far(self, *, cwd: str | None, cursor: str | None) -> FarPage | None:
        records = tuple(
            SessionRecord(session_id=sid, cwd="/far", created_at=1, updated_at=1)
            for sid in ("far-1", "far-2")
        )
        return FarPage(records=records)

    def far_id(self, config: Mapping[str, str]) -> str | None:
        return config.get("far_session")

    def far_ids(self) -> set[str]:
        return set()


class DescribesOnly:
    def describe(self, info: PortInfo) -> PortInfo:
        return info


class HalfSettles:
    async def set_mode(self, conversation: FarConversation, mode_id: str) -> LoopEvent | None:
        return None


def test_an_engine_is_each_protocol_only_when_it_implements_all_of_it() -> None:
    engine = FarEngine()
    assert isinstance(engine, Describes | Settles | ListsFar)
    assert isinstance(engine, Describes) and isinstance(engine, Settles)
    assert isinstance(engine, ListsFar)
    assert isinstance(DescribesOnly(), Describes) and not isinstance(DescribesOnly(), Settles)
    assert not isinstance(HalfSettles(), Settles)  # no set_option: not a Settles


def mapped_to(far_session: str) -> ev.ConfigChanged:
    """The setting a bridge logs for the far session a conversation continues."""
    return ev.ConfigChanged(
        session_id="", run_id="", seq=-1, ts=0, option_id="far_session", value=far_session
    )


def port_with(engine: Any) -> LocalPort:
    agent = make_agent(scripted({"text": "ok"}, loop=True))
    agent.engine = engine
    return LocalPort(agent)


async def test_the_far_agent_describes_what_the_port_advertises() -> None:
    info = port_with(FarEngine()).info()
    assert not info.can_fork and info.modes == (("plan", "Plan", "Plan only"),)
    plain = port_with(None).info()
    assert plain.can_fork and {mode for mode, _, _ in plain.modes} >= {"default", "read-only"}


async def test_modes_and_options_are_the_far_agents_and_its_refusal_stands() -> None:
    engine = FarEngine()
    port = port_with(engine)
    conversation = await port.open("/w")
    cid = conversation.conversation_id
    await port.record(cid, mapped_to("far-9"))
    changed = await port.set_mode(cid, "plan")
    assert isinstance(changed, ev.ModeChanged) and changed.session_id == cid
    kind, far, _ = engine.asked[0]
    assert (kind, far.conversation_id, far.cwd, far.mode) == ("mode", cid, "/w", "default")
    assert far.config == {"far_session": "far-9"}
    with pytest.raises(ValueError, match="modes: plan"):
        await port.set_mode(cid, "default")  # ours, but not the far agent's
    option = await port.set_option(cid, "effort", "high")
    assert isinstance(option, ev.ConfigChanged)
    assert (option.option_id, option.value) == ("effort", "high")
    assert engine.asked[-1][1].mode == "plan"  # the conversation as it is now


async def test_the_far_agents_sessions_follow_ours_without_those_we_map_to() -> None:
    port = port_with(FarEngine())
    ours = await port.open("/w")
    await port.record(ours.conversation_id, mapped_to("far-1"))
    first = await port.list()
    assert [r.session_id for r in first.records] == [ours.conversation_id]
    assert first.next_cursor is not None
    far = await port.list(cursor=first.next_cursor)
    assert [r.session_id for r in far.records] == ["far-2"]  # far-1 is ours already
    assert far.next_cursor is None
    assert [r.session_id for r in (await port.list(user="ann")).records] == []  # single-user


def test_far_values_are_frozen() -> None:
    page = FarPage(records=())
    assert page.next_cursor is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        page.next_cursor = "x"  # type: ignore[misc]
