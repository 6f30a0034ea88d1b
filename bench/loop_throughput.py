"""Loop throughput: how many LoopEvents per second the runtime logs with no I/O.

A scripted model streams 100,000 one-character text deltas through one turn of a real
`Agent` session (in-memory store, no sink). Prints LoopEvents/s, then, with tracemalloc on,
the peak memory of that turn, and finally runs many turns in one session to show that what
stays in memory as past turns pile up is the log itself: dropping everything but the logged
events frees almost nothing. (Each `model_request` event holds its step's full history, so
bytes per event creep up slowly with conversation length; that is the log, by design.)

    uv run python bench/loop_throughput.py [--deltas 100000] [--turns 20]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import anyio

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.turns.turn import LoopSettings, TurnInput
from steerable_bridge.runtime.values import TextPart

TARGET = 150_000


def make_agent(deltas: int) -> Agent:
    script = Script(rounds=[Round(text="x" * deltas, chunk_size=1)], loop=True)
    provider = ScriptedProvider(script, route="scripted:bench")

    def factory(name: str) -> ModelProvider:
        return provider

    router = ModelRouter()
    router.register("scripted", factory)
    counter = iter(range(10**12))
    config = AgentConfig(
        model="scripted:bench",
        loop=LoopSettings(new_id=lambda prefix: f"{prefix}_{next(counter)}"),
    )
    return Agent(router=router, store=MemoryStore(), config=config)


async def one_turn(session: Session, n: int) -> int:
    before = len(session.log)
    outcome = await session.prompt(TurnInput(content=(TextPart(text=f"turn {n}"),)))
    assert outcome.stop_reason == "end_turn", outcome
    return len(session.log) - before


async def throughput(deltas: int, repeats: int) -> None:
    best = 0.0
    for _ in range(repeats):
        agent = make_agent(deltas)
        session = await agent.new_session("/tmp")
        gc.collect()
        start = time.perf_counter()
        events = await one_turn(session, 0)
        elapsed = time.perf_counter() - start
        best = max(best, events / elapsed)
        print(f"  {events:,} events in {elapsed:.3f}s = {events / elapsed:,.0f} LoopEvents/s")
    verdict = "meets" if best >= TARGET else "BELOW"
    print(f"best: {best:,.0f} LoopEvents/s ({verdict} the {TARGET:,}/s target)")


async def peak_memory(deltas: int) -> None:
    agent = make_agent(deltas)
    session = await agent.new_session("/tmp")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    events = await one_turn(session, 0)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"one turn of {events:,} events: peak {(peak - base) / 2**20:.1f} MiB,"
        f" kept {(current - base) / 2**20:.1f} MiB ({(current - base) / events:.0f} B/event)"
    )


async def past_turns(deltas: int, turns: int) -> None:
    agent = make_agent(deltas)
    session = await agent.new_session("/tmp")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    print(f"{turns} turns of {deltas:,} deltas in one session (memory above the start):")
    print("  turn   logged events   kept MiB   B/logged event   turn peak above kept MiB")
    for n in range(1, turns + 1):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await one_turn(session, n)
        current, peak = tracemalloc.get_traced_memory()
        if n in (1, 2, 5) or n % 5 == 0:
            kept = current - base
            print(
                f"  {n:4d}   {len(session.log):13,}   {kept / 2**20:8.1f}"
                f"   {kept / len(session.log):14.0f}   {(peak - before) / 2**20:24.1f}"
            )
    kept = tracemalloc.get_traced_memory()[0] - base
    log = session.log.view()  # holds the log's own event list, no copy
    del agent, session
    gc.collect()
    only_log = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(
        f"after {turns} turns: {kept / 2**20:.1f} MiB kept, of which the {len(log):,} logged"
        f" events alone hold {only_log / 2**20:.1f} MiB; everything else (session, store,"
        f" facts, queues) {(kept - only_log) / 2**10:.0f} KiB, of which the memory store's"
        f" own list of the same events is {len(log) * 8 / 2**10:.0f} KiB"
    )


async def main(args: argparse.Namespace) -> None:
    print(f"throughput: {args.deltas:,} text deltas through one turn")
    await throughput(args.deltas, args.repeats)
    await peak_memory(args.deltas)
    await past_turns(args.turn_deltas, args.turns)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--turn-deltas", type=int, default=5_000)
    anyio.run(main, parser.parse_args())
