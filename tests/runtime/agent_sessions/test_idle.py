"""Bounded memory: idle sessions are forgotten over the cap or after the TTL and reload."""

from __future__ import annotations

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.model_context.projection import project_history
from tests.runtime.harness import make_agent, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def test_the_cache_forgets_idle_entries_oldest_first_and_after_the_ttl() -> None:
    now = [0.0]
    cache: IdleCache[str, str] = IdleCache(capacity=2, ttl_s=10, clock=lambda: now[0])
    for key in "abc":
        cache.put(key, key.upper())
        now[0] += 1
    assert cache.sweep(lambda value: value != "A") == ["B"]  # "A" is busy: skipped
    assert cache.key_list() == ["a", "c"]
    cache.get("a")  # used again: now the newest
    assert cache.sweep(lambda value: True) == []  # at capacity, nothing expired
    now[0] += 10
    assert cache.sweep(lambda value: value == "C") == ["C"]  # expired and idle
    assert cache.key_list() == ["a"]


async def test_idle_sessions_are_forgotten_and_reload_with_their_history() -> None:
    store = MemoryStore()
    agent = make_agent(scripted({"text": "ok"}, loop=True), store=store, max_sessions=2)
    ids = []
    for n in range(5):
        session = await agent.new_session("/work")
        await prompt(session, f"hello {n}")
        ids.append(session.id)
    assert agent.sessions_in_memory == 2
    assert agent.get(ids[0]) is None
    again = await agent.load_session(ids[0])
    assert [m.text for m in project_history(again.log.view())] == ["hello 0", "ok"]
    outcome, _ = await prompt(again, "back again")
    assert outcome.stop_reason == "end_turn"
    assert agent.sessions_in_memory == 2 and agent.get(ids[0]) is again


async def test_a_running_session_is_never_forgotten() -> None:
    agent = make_agent(scripted({"text": "wait", "hang": True}), max_sessions=1)
    first = await agent.new_session("/work")
    started = anyio.Event()

    def on_event(event: ev.LoopEvent) -> None:
        if isinstance(event, ev.TextDelta):
            started.set()

    async def run() -> None:
        await prompt(first, "hi", on_event=on_event)

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        for _ in range(3):
            await agent.new_session("/work")
        assert agent.get(first.id) is first  # over the cap, but running
        first.cancel()
    assert agent.sessions_in_memory == 1
