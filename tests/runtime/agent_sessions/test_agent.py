"""The agent (`runtime/agent_sessions/agent.py`): it creates sessions in its store, keeps
them in memory (the same object while held) and rebuilds a forgotten one from the store with
its log and settings; an unknown id is `SessionNotFound`; loading a session whose turn a
dead process left open closes that turn; `close_session` cancels a running turn and keeps the log,
`delete_session` removes it; `steer` / `cancel` reach a turn this process runs, say False
when none runs, and reach a turn another process runs through the store's signals."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.ports.storage import SessionNotFound
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

HI = (TextPart(text="hi"),)


def agent_on(store: object, *, hang: bool = False) -> Agent:
    rounds = {"text": "thinking...", "hang": True} if hang else {"text": "ok"}
    return make_agent(scripted(rounds, loop=True), store=store)  # type: ignore[arg-type]


class Running:
    """A turn run in the background that streams and then hangs until cancelled."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.streaming = anyio.Event()
        self.done = anyio.Event()
        self.outcome: RunOutcome | None = None

    async def __call__(self) -> None:
        async def sink(event: ev.LoopEvent) -> None:
            if isinstance(event, ev.TextDelta):
                self.streaming.set()

        self.outcome = await self.session.prompt(TurnInput(content=HI), sink)
        self.done.set()

    async def start(self, tg: TaskGroup) -> None:
        tg.start_soon(self)
        await self.streaming.wait()


async def test_a_new_session_is_stored_and_held_in_memory() -> None:
    store = MemoryStore()
    agent = agent_on(store)
    session = await agent.new_session("/w", session_id="s-1", user="ann")
    record = await agent.session_record("s-1")
    assert record is not None and (record.cwd, record.model, record.user) == ("/w", "test:m", "ann")
    assert agent.get("s-1") is session and await agent.load_session("s-1") is session
    assert agent.sessions_in_memory == 1


async def test_a_forgotten_session_is_rebuilt_from_the_store() -> None:
    agent = agent_on(MemoryStore())
    session = await agent.new_session("/w")
    await prompt(session)
    await session.record(ev.ModeChanged, mode_id="accept-edits")
    logged = list(session.log.view())
    assert agent.forget(session.id) is True and agent.get(session.id) is None
    again = await agent.load_session(session.id)
    assert again is not session
    assert list(again.log.view().folded()) == list(session.log.view().folded())
    assert again.mode == "accept-edits" and len(again.log) == len(logged)


async def test_an_unknown_session_is_not_found() -> None:
    with pytest.raises(SessionNotFound) as missing:
        await agent_on(MemoryStore()).load_session("nope")
    assert missing.value.code == "session_not_found"


async def test_loading_a_session_a_dead_process_left_running_closes_its_turn() -> None:
    store = MemoryStore()
    first = await agent_on(store).new_session("/w")
    first.log.record(ev.RunStarted, "run_dead", model="test:m")
    await first.log.commit()  # then the process died
    loaded = await agent_on(store).load_session(first.id)
    assert not loaded.facts.running
    stored = [e for e in await store.read(first.id) if e.run_id == "run_dead"]
    assert [e.kind for e in stored] == ["run_started", "run_failed"]


async def test_steer_and_cancel_reach_a_turn_here_and_say_false_when_none_runs() -> None:
    agent = agent_on(MemoryStore(), hang=True)
    session = await agent.new_session("/w")
    assert await agent.steer(session.id, HI) is False
    assert await agent.cancel(session.id) is False
    turn = Running(session)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await turn.start(tg)
            assert await agent.steer(session.id, HI, "m1") is True
            assert len(session.steering) == 1
            assert await agent.cancel(session.id, "enough") is True
    assert turn.outcome is not None and turn.outcome.stop_reason == "cancelled"


async def test_close_session_cancels_its_turn_and_delete_removes_its_log() -> None:
    store = MemoryStore()
    agent = agent_on(store, hang=True)
    session = await agent.new_session("/w")
    turn = Running(session)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await turn.start(tg)
            assert await agent.close_session(session.id) is True
    assert turn.outcome is not None and turn.outcome.stop_reason == "cancelled" and session.closed
    assert agent.get(session.id) is None and await store.read(session.id)  # the log stays
    assert await agent.close_session(session.id) is False
    assert await agent.delete_session(session.id) is True
    assert await agent.session_record(session.id) is None
    assert await agent.delete_session(session.id) is False


async def test_a_cancel_from_another_process_reaches_the_turn_through_the_store(
    tmp_path: Path,
) -> None:
    runner = agent_on(SqliteStore(tmp_path / "s.db"), hang=True)
    other = agent_on(SqliteStore(tmp_path / "s.db"))
    assert runner.shares_store and other.shares_store
    session = await runner.new_session("/w")
    turn = Running(session)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(runner.relay_signals)
            await turn.start(tg)
            assert await other.owner_elsewhere(session.id) is not None
            assert await runner.owner_elsewhere(session.id) is None  # its own turn
            assert await other.cancel(session.id, "from the other process") is True
            await turn.done.wait()  # the relay delivers it within the store's poll
            tg.cancel_scope.cancel()
    assert turn.outcome is not None and turn.outcome.stop_reason == "cancelled"
    await runner.aclose()
    await other.aclose()
