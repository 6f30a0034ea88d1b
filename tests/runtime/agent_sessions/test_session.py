"""A session (`runtime/agent_sessions/session.py`): one turn at a time (a second prompt is
refused with `SessionBusy` and logs nothing); `cancel`, `steer`, `follow_up` and
`request_compact` reach only a running turn and say False when idle; mode and model are
folded from the log, so `record` outside a turn changes them at once and durably; the tools
a step offers are the registered ones with the session's extras winning by name, plus
`ask_user` when questions can be asked; a prompt first closes a turn a dead process left
open in the store."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.session import Session, SessionBusy
from steerable_bridge.runtime.ports.questions import ASK_USER_NAME, Questions
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import assert_well_formed, kinds, make_agent, prompt, scripted, text_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

HI = (TextPart(text="hi"),)


async def idle_session(**options: Any) -> Session:
    return await make_agent(scripted({"text": "ok"}, loop=True), **options).new_session("/w")


async def test_an_idle_session_has_no_turn_to_reach() -> None:
    session = await idle_session()
    assert not session.running
    assert session.cancel() is False
    assert session.steer(HI) is False and session.follow_up(HI) is False
    assert session.request_compact() is False
    assert len(session.steering) == 0 and len(session.follow_ups) == 0


async def test_a_second_prompt_is_refused_while_a_turn_runs_and_logs_nothing() -> None:
    agent = make_agent(scripted({"text": "thinking...", "hang": True}))
    session = await agent.new_session("/w")
    streaming = anyio.Event()
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)
        if isinstance(event, ev.TextDelta):
            streaming.set()

    async def first() -> None:
        await session.prompt(TurnInput(content=HI), sink)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await streaming.wait()
            assert session.running
            logged = len(session.log)
            with pytest.raises(SessionBusy) as refused:
                await session.prompt(TurnInput(content=HI))
            assert refused.value.code == "session_busy"
            assert len(session.log) == logged
            assert session.steer(HI, "m9") is True and len(session.steering) == 1
            assert session.cancel("stop now") is True
    assert not session.running
    finished = seen[-1]
    assert isinstance(finished, ev.RunFinished) and finished.stop_reason == "cancelled"
    assert_well_formed(seen)


async def test_mode_and_model_come_from_the_log_and_survive_a_reload() -> None:
    store = MemoryStore()
    session = await idle_session(store=store)
    assert (session.mode, session.model) == ("default", "test:m")
    await session.record(ev.ModeChanged, mode_id="read-only")
    await session.record(ev.ConfigChanged, option_id="model", value="test:other")
    assert (session.mode, session.model) == ("read-only", "test:other")
    reloaded = await make_agent(scripted({"text": "ok"}), store=store).load_session(session.id)
    assert reloaded is not session
    assert (reloaded.mode, reloaded.model) == ("read-only", "test:other")


async def test_the_sessions_extra_tools_win_by_name_and_ask_user_joins_with_questions() -> None:
    session = await idle_session(tools=[text_tool("echo"), text_tool("look")])
    mine = text_tool("echo", kind="edit")
    session.extra_tools = (mine,)
    tools = session.tools()
    assert [t.name for t in tools] == ["look", "echo"]
    assert tools[-1] is mine
    assert ASK_USER_NAME not in {t.name for t in tools}
    session.questions = Questions()
    assert [t.name for t in session.tools()] == ["look", "echo", ASK_USER_NAME]


async def test_a_prompt_first_closes_a_turn_a_dead_process_left_open() -> None:
    store = MemoryStore()
    session = await idle_session(store=store)
    await prompt(session)
    other = await make_agent(scripted({"text": "ok"}), store=store).load_session(session.id)
    other.log.record(ev.RunStarted, "run_dead", model="test:m")
    await other.log.commit()  # another process started a turn there, then died
    _, seen = await prompt(session, "again")
    logged = await store.read(session.id)
    closed = [e for e in logged if e.run_id == "run_dead"]
    assert kinds(closed) == ["run_started", "run_failed"]
    failed = closed[-1]
    assert isinstance(failed, ev.RunFailed) and failed.code == "interrupted"
    assert failed.seq < seen[0].seq  # closed before the new turn began
    assert isinstance(seen[-1], ev.RunFinished)
