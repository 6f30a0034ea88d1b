"""Long sessions: stored bytes against payload, 300-turn load time, `serve` memory.

1. Storage: one session on a `SqliteStore` runs `--turns` turns; each turn the model reads
   a file (a `--tool-bytes` tool output) and answers. The model enforces a `--window`-token
   context (scripted `overflow_at`, as a server answering `context_length_exceeded`) and
   reports it, so compaction keeps every request inside it. At 50, 150 and 300 turns it
   prints the bytes the store holds for the session (the `data` column of its event rows:
   the record bodies), the payload bytes (user text, answer text, tool output) and their
   ratio, and the compactions so far. A second ratio, `table / payload`, counts the whole
   `events` table instead: every page SQLite uses for its rows (all columns, the row
   headers, free space in pages) and its three indexes (`dbstat`); the file holds only
   this session, so it is what the session costs on disk. By default every turn's tool
   call and output are the same (as in the figures of issue 13); `--distinct` gives each
   turn its own call id and output (a realistic session: nothing repeats, so nothing is
   stored once for two turns).
2. Load: `Agent.load_session` of the 300-turn session in a fresh agent and store (tail
   first: from the newest compaction), best of five, in ms.
3. Memory: `steerable-bridge serve` (demo model, SQLite storage) takes `--threads` runs on
   new threads, `--concurrency` at a time; prints its RSS before and after.

    uv run python bench/long_session.py [--turns 300] [--threads 10000] [--distinct]

Targets (issue 13): stored/payload <= 2x and constant; load < 100 ms; serve RSS after
10,000 threads < 150 MiB.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelProvider,
    ModelRequest,
    ModelStreamItem,
    ToolCallChunk,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.turns.turn import LoopSettings, TurnInput
from steerable_bridge.runtime.values import TextPart

CHECKPOINTS = (50, 150, 300)


class _DistinctCalls:
    """The scripted model with each model call's tool call ids made its own (`--distinct`)."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def info(self) -> ModelInfo:
        return self.inner.info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        async for item in self.inner.stream(request):
            if isinstance(item, ToolCallChunk):
                item = dataclasses.replace(item, call_id=f"{item.call_id}-{self.calls}")
            yield item


def _agent(
    store: SqliteStore, provider: ScriptedProvider, output: str, *, distinct: bool = False
) -> Agent:
    router = ModelRouter()
    model: ModelProvider = _DistinctCalls(provider) if distinct else provider
    router.register("bench", lambda name: model)
    agent = Agent(
        router=router,
        store=store,
        config=AgentConfig(model="bench:m", approval="all", loop=LoopSettings()),
    )

    async def read(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text = f"{ctx.call_id}: {output[len(ctx.call_id) + 2 :]}" if distinct else output
        return ToolResult(content=(TextPart(text=text),))

    agent.tools.register(
        Tool(
            name="read_file",
            description="Read a file",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            kind="read",
            handler=read,
        )
    )
    return agent


def _payload(events: list[ev.LoopEvent]) -> int:
    total = 0
    for event in events:
        if isinstance(event, ev.UserMessage):
            total += sum(len(p.text.encode()) for p in event.content if isinstance(p, TextPart))
        elif isinstance(event, ev.TextDelta):
            total += len(event.delta.encode())
        elif isinstance(event, ev.ToolFinished):
            total += sum(len(p.text.encode()) for p in event.content if isinstance(p, TextPart))
    return total


def _table(path: Path) -> int:
    """Bytes of every page of the events table and its indexes (`dbstat`)."""
    names = ("events", "events_by_seq", "events_by_kind", "events_with_facts")
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({', '.join('?' * len(names))})",
            names,
        ).fetchone()
    return int(row[0] or 0)


def _stored(path: Path, session_id: str) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT sum(length(data)) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()
    return int(row[0] or 0)


async def storage(
    turns: int, window: int, tool_bytes: int, db: Path, distinct: bool = False
) -> str:
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    output = (line * (tool_bytes // len(line) + 1))[:tool_bytes]
    script = Script.model_validate(
        {
            "rounds": [
                {"tool_calls": [{"id": "c", "name": "read_file", "arguments": {"path": "a"}}]},
                {"text": "I read the file; it lists the fox line again and again."},
            ],
            "loop": True,
            "context_window": window,
            "overflow_at": window,
            "summary_rounds": [{"text": "Summary: the user asked for the file each turn."}],
        }
    )
    provider = ScriptedProvider(script)
    store = SqliteStore(str(db))
    agent = _agent(store, provider, output, distinct=distinct)
    session = await agent.new_session("/work")
    print(
        f"storage: window {window} tokens, tool output {tool_bytes} bytes per turn"
        + (", every turn's call and output distinct" if distinct else "")
    )
    print("  turns  stored bytes  payload bytes  ratio  compactions  failed  table / payload")
    failed = 0
    for turn in range(1, turns + 1):
        text = f"turn {turn}: read the file again"
        outcome = await session.prompt(TurnInput(content=(TextPart(text=text),)))
        failed += outcome.stop_reason is None
        if turn in CHECKPOINTS or turn == turns:
            events = await store.read(session.id)
            stored, payload = _stored(db, session.id), _payload(events)
            folds = sum(isinstance(e, ev.Compaction) for e in events)
            table = _table(db)
            print(
                f"  {turn:5d}  {stored:12,d}  {payload:13,d}  {stored / payload:5.2f}"
                f"  {folds:11d}  {failed:6d}  {table:,d} / {payload:,d} = {table / payload:.2f}"
            )
    await agent.aclose()
    return session.id


async def load(db: Path, session_id: str) -> None:
    times = []
    for _ in range(5):
        store = SqliteStore(str(db))
        agent = _agent(store, ScriptedProvider(Script(rounds=[])), "")
        started = time.perf_counter()
        session = await agent.load_session(session_id)
        times.append((time.perf_counter() - started) * 1000)
        events = len(session.log)
        await agent.aclose()
    total = len(await SqliteStore(str(db)).read(session_id))
    print(f"load: {min(times):.1f} ms best of 5 ({events} of {total} events read, tail first)")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve_memory(threads: int, concurrency: int, db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    env |= {"STEERABLE_DEMO_PACE_MS": "0", "STEERABLE_STORAGE": str(db)}
    process = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().split()[-1]
        base = endpoint.removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=30) as probe:
            for _ in range(200):
                try:
                    probe.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
        before = _rss_mib(process.pid)
        started = time.perf_counter()
        marks: dict[int, float] = {}

        async def drive() -> None:
            limiter = anyio.Semaphore(concurrency)
            done = 0
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def one(n: int) -> None:
                    nonlocal done
                    async with limiter:
                        body = {
                            "threadId": f"bench-{n}",
                            "runId": "r1",
                            "messages": [{"id": f"u{n}", "role": "user", "content": "hello"}],
                        }
                        reply = await client.post("/agent", json=body)
                        reply.raise_for_status()
                    done += 1
                    if done % 2500 == 0:
                        marks[done] = _rss_mib(process.pid)

                async with anyio.create_task_group() as group:
                    for n in range(threads):
                        group.start_soon(one, n)

        anyio.run(drive)
        elapsed = time.perf_counter() - started
        after = _rss_mib(process.pid)
        steps = ", ".join(f"{n:,}: {rss:.0f}" for n, rss in sorted(marks.items()))
        print(
            f"serve: RSS {before:.0f} MiB at start, {after:.0f} MiB after {threads:,} new"
            f" threads ({threads / elapsed:.0f} runs/s; MiB by runs {steps})"
        )
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--tool-bytes", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--distinct", action="store_true", help="a new call and output per turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "long.db"
        session_id = anyio.run(storage, args.turns, args.window, args.tool_bytes, db, args.distinct)
        anyio.run(load, db, session_id)
        if args.threads:
            serve_memory(args.threads, args.concurrency, Path(tmp) / "serve.db")


if __name__ == "__main__":
    main()
