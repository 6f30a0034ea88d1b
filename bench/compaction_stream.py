"""A streamed compaction summary: what its pieces cost in the store and on the ACP wire.

A real `Agent` on a `SqliteStore` runs two turns, then a `/compact` turn whose scripted
summary (about 4,000 characters) streams in `--piece`-character pieces, so the compactor logs
about a thousand `compaction_summary_delta` events. Prints the events logged, the rows the
store keeps for them (consecutive pieces fold into run rows, as text deltas do), the compact
turn's time with the summary streamed and in one piece (the cost of streaming it), and the
ACP rendering of one piece (`AcpRenderer.render` to a `compaction_summary_chunk`, then its
JSON dump), in µs.

    uv run python bench/compaction_stream.py [--piece 4] [--runs 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp.renderer import AcpRenderer

SUMMARY = "The user asked for a refactor of the parser; the assistant read three files. " * 52


async def compact_once(folder: Path, piece: int) -> tuple[float, int, int]:
    """(seconds of the compact turn, pieces logged, rows stored for them)."""
    script = Script(
        rounds=[Round(text="a long answer " * 60)],
        loop=True,
        summary_rounds=[Round(text=SUMMARY, chunk_size=piece)],
    )
    router = ModelRouter()
    router.register("s", lambda name: ScriptedProvider(script))
    path = folder / f"bench-{piece}-{time.monotonic_ns()}.db"
    store = SqliteStore(path)
    try:
        agent = Agent(router=router, store=store, config=AgentConfig(model="s:m"))
        session = await agent.new_session("/w")
        for text in ("first", "second"):
            await session.prompt(TurnInput(content=(TextPart(text=text),)))
        start = time.perf_counter()
        await session.prompt(TurnInput(compact=True))
        took = time.perf_counter() - start
        pieces = sum(isinstance(e, ev.CompactionSummaryDelta) for e in session.log.view())
        await agent.aclose()
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'compaction_summary_delta'"
        ).fetchone()
    return took, pieces, int(rows)


def render_us(count: int = 20_000) -> float:
    renderer = AcpRenderer(compaction=True)
    event = ev.CompactionSummaryDelta(
        session_id="s", run_id="r", seq=1, ts=1, compaction_id="compaction_1", delta="abcd"
    )
    start = time.perf_counter()
    for _ in range(count):
        for update in renderer.render(event):
            update.model_dump_json(by_alias=True, exclude_none=True)
    return (time.perf_counter() - start) / count * 1e6


async def main(piece: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        streamed = [await compact_once(Path(folder), piece) for _ in range(runs)]
        whole = [await compact_once(Path(folder), 0) for _ in range(runs)]
    _, pieces, rows = streamed[0]
    print(f"summary: {len(SUMMARY.strip()):,} characters in {piece}-character pieces")
    print(f"pieces logged: {pieces:,}; rows stored for them: {rows:,}")
    print(f"compact turn, streamed:  {statistics.median(t for t, _, _ in streamed) * 1e3:.1f} ms")
    print(f"compact turn, one piece: {statistics.median(t for t, _, _ in whole) * 1e3:.1f} ms")
    print(f"ACP render + dump of one piece: {render_us():.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--piece", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.piece, args.runs)
