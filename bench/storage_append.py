"""SQLite store: events/s appended the way the loop commits, and session load time.

1. Through the loop: a real `Agent` session on a `SqliteStore` runs turns whose scripted
   model streams text deltas and calls a tool every step, so the loop commits the way it
   always does (structural events at once, deltas batched at least every 250 ms). Prints
   LoopEvents/s, the same with the in-memory store for comparison, and the transactions.
   (The scripted model streams instantly, so "every 250 ms" rarely fires: batches end at
   structural events — the worst case for a store, many small transactions.)
2. The store alone: the same events appended in the same batches straight to a fresh
   store (no loop cost), events/s; and one event per transaction (the cost of each
   structural commit).
3. Load: `Agent.load_session` of a 10,000-event session in a fresh agent and store (cold
   connection), best of several; and the tail read of a session compacted near its end.

    uv run python bench/storage_append.py [--deltas 50000] [--load-events 10000]

Targets (issue 6): >= 50,000 events/s appended; load of 10,000 events < 200 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider, ScriptToolCall
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.ports.storage import SessionRecord, SessionStore, read_tail
from steerable_bridge.runtime.turns.turn import LoopSettings, TurnInput
from steerable_bridge.runtime.values import TextPart

APPEND_TARGET = 50_000
LOAD_TARGET_MS = 200.0


class CountingStore:
    """Wraps a store to count append calls (one transaction each)."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def append(self, session_id: str, events: list[ev.LoopEvent]) -> None:
        self.batches.append(len(events))
        await self.inner.append(session_id, events)


def make_agent(store: SessionStore, deltas_per_turn: int) -> Agent:
    """Each turn: a step streaming deltas and calling `calculate`, then a closing step."""
    half = max(1, deltas_per_turn // 2)
    call = ScriptToolCall(id="c1", name="calculate", arguments={"expression": "6*7"})
    rounds = [
        Round(text="x" * half, chunk_size=1, tool_calls=[call]),
        Round(text="y" * half, chunk_size=1),
    ]
    provider = ScriptedProvider(Script(rounds=rounds, loop=True), route="scripted:bench")

    def factory(name: str) -> ModelProvider:
        return provider

    router = ModelRouter()
    router.register("scripted", factory)
    counter = iter(range(10**12))
    config = AgentConfig(
        model="scripted:bench",
        loop=LoopSettings(new_id=lambda prefix: f"{prefix}_{next(counter)}"),
    )
    agent = Agent(router=router, store=store, config=config)
    for tool in builtin_tools():
        agent.tools.register(tool)
    return agent


async def through_loop(store: SessionStore, deltas: int, turns: int) -> tuple[float, int, int]:
    """(events/s, events, transactions) for `turns` turns of `deltas // turns` deltas."""
    counting = CountingStore(store)
    agent = make_agent(counting, deltas // turns)  # type: ignore[arg-type]
    session = await agent.new_session("/bench")
    start = time.perf_counter()
    for n in range(turns):
        outcome = await session.prompt(TurnInput(content=(TextPart(text=f"turn {n}"),)))
        assert outcome.stop_reason == "end_turn", outcome
    elapsed = time.perf_counter() - start
    return len(session.log) / elapsed, len(session.log), len(counting.batches)


async def store_alone(db: Path, events: list[ev.LoopEvent], batches: list[int]) -> float:
    store = SqliteStore(db)
    sid = events[0].session_id
    await store.create(SessionRecord(session_id=sid, cwd="/b", created_at=0, updated_at=0))
    start = time.perf_counter()
    at = 0
    for size in batches:
        await store.append(sid, events[at : at + size])
        at += size
    elapsed = time.perf_counter() - start
    store.close()
    return len(events) / elapsed


async def build_session(db: Path, count: int, *, compact_at: int | None = None) -> str:
    """A session of `count` events: turns of text deltas, a tool call and result each."""
    store = SqliteStore(db)
    sid = f"load_{count}_{compact_at}"
    await store.create(SessionRecord(session_id=sid, cwd="/b", created_at=0, updated_at=0))
    batch: list[ev.LoopEvent] = []
    seq = 0
    turn = 0
    while seq < count:
        run = f"run_{turn}"

        def add(cls: type[ev.EventBase], run_id: str = run, **fields: object) -> None:
            nonlocal seq
            if seq < count:
                batch.append(cls(session_id=sid, run_id=run_id, seq=seq, ts=seq, **fields))  # type: ignore[arg-type]
                seq += 1

        add(ev.RunStarted, model="m")
        add(ev.UserMessage, message_id=f"u{turn}", content=(TextPart(text="go on"),))
        if compact_at is not None and turn == compact_at:
            add(ev.Compaction, summary="earlier work, summarised", through_seq=seq - 1)
        add(ev.TextStart, message_id=f"m{turn}")
        for _ in range(90):
            add(ev.TextDelta, message_id=f"m{turn}", delta="word ")
        add(ev.TextEnd, message_id=f"m{turn}")
        add(ev.ToolCallEnd, call_id=f"c{turn}", name="calc", arguments_json='{"e":"1+1"}')
        add(ev.ToolFinished, call_id=f"c{turn}", status="completed", content=(TextPart(text="2"),))
        add(ev.RunFinished, stop_reason="end_turn")
        turn += 1
    # close a run cut short by `count`, so loading appends nothing
    if not isinstance(batch[-1], ev.RunFinished):
        del batch[max(i for i, e in enumerate(batch) if isinstance(e, ev.RunFinished)) + 1 :]
    await store.append(sid, batch)
    store.close()
    return sid


async def timed_load(db: Path, sid: str, repeats: int) -> tuple[float, int]:
    times: list[float] = []
    size = 0
    for _ in range(repeats):
        store = SqliteStore(db)
        agent = make_agent(store, 1)
        start = time.perf_counter()
        session = await agent.load_session(sid)
        times.append((time.perf_counter() - start) * 1000)
        size = len(session.log)
        store.close()
    return min(times), size


async def timed_tail(db: Path, sid: str, repeats: int) -> tuple[float, int]:
    times: list[float] = []
    size = 0
    for _ in range(repeats):
        store = SqliteStore(db)
        start = time.perf_counter()
        tail = await read_tail(store, sid)
        times.append((time.perf_counter() - start) * 1000)
        size = len(tail)
        store.close()
    return statistics.median(times), size


async def main(deltas: int, load_events: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rate_mem, _, _ = await through_loop(MemoryStore(), deltas, 10)
        sqlite = SqliteStore(root / "loop.db")
        rate, count, transactions = await through_loop(sqlite, deltas, 10)
        print(
            f"through the loop, SQLite : {rate:>10,.0f} events/s ({count:,} events,"
            f" {transactions:,} transactions)"
        )
        print(f"through the loop, memory : {rate_mem:>10,.0f} events/s")
        sid = (await sqlite.list()).records[0].session_id
        events = await sqlite.read(sid)
        sqlite.close()
        counting = CountingStore(MemoryStore())
        agent = make_agent(counting, deltas // 10)  # type: ignore[arg-type]
        session = await agent.new_session("/bench")
        for n in range(10):
            await session.prompt(TurnInput(content=(TextPart(text=f"turn {n}"),)))
        replay = [e for e in session.log.view()]
        alone = await store_alone(root / "alone.db", replay, counting.batches)
        del events
        verdict = "meets" if alone >= APPEND_TARGET else "MISSES"
        print(
            f"store alone, loop batches: {alone:>10,.0f} events/s — {verdict} the"
            f" {APPEND_TARGET:,}/s target"
        )
        single = await store_alone(root / "single.db", replay[:2000], [1] * 2000)
        print(
            f"store alone, 1 event/txn : {single:>10,.0f} events/s"
            f" ({1000 / single:.3f} ms per structural commit)"
        )

        sid = await build_session(root / "load.db", load_events)
        best, size = await timed_load(root / "load.db", sid, 7)
        verdict = "meets" if best < LOAD_TARGET_MS else "MISSES"
        print(
            f"load_session, {size:,} events: {best:8.1f} ms (best of 7, cold store) —"
            f" {verdict} the {LOAD_TARGET_MS:.0f} ms target"
        )
        turns = load_events // 96
        sid = await build_session(root / "tail.db", load_events, compact_at=turns - 3)
        median, size = await timed_tail(root / "tail.db", sid, 7)
        print(
            f"read_tail, {load_events:,} events compacted 3 turns from the end: {median:6.1f}"
            f" ms for {size:,} events (median of 7)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=50_000)
    parser.add_argument("--load-events", type=int, default=10_000)
    args = parser.parse_args()
    anyio.run(main, args.deltas, args.load_events)
