"""Replay throughput of `GET /agent/threads/{id}/events` on a 10,000-event thread (loopback).

Builds one thread on a scripted model whose reply streams `--events` one-character text
deltas (so the thread's log holds about that many events), served by the AG-UI app under
uvicorn on 127.0.0.1 with the given store (`--storage memory` or an SQLite path), then
resumes its stream `--reps` times: from the start (`?after=-1`, the whole thread), and from
the middle (`Last-Event-ID` of the middle frame). Prints the frames and bytes per replay,
the median and best wall time, frames/s and MB/s, and the same for the in-process
re-rendering alone (`resume.Restream` over the events, no HTTP), so the HTTP and store
costs can be told apart. Every wait is bounded (`--timeout` per request).
Run: `uv run python bench/agui_resume.py [--events 10000] [--reps 20] [--storage PATH]`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import uvicorn

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.transports.agui.app import create_app
from steerable_bridge.transports.agui.resume import EventId, Restream

ID = re.compile(rb"^id: ([^\n]+)\n", re.MULTILINE)


def _agent(events: int, storage: str) -> Agent:
    script = Script.model_validate(
        {"rounds": [{"text": "x" * events, "chunk_size": 1}], "loop": True}
    )
    router = ModelRouter()
    router.register("bench", lambda name: ScriptedProvider(script))
    store = MemoryStore() if storage == "memory" else SqliteStore(storage)
    return Agent(router=router, store=store, config=AgentConfig(model="bench:m", approval="all"))


async def main(args: argparse.Namespace) -> None:
    port = LocalPort(_agent(args.events, args.storage))
    app = create_app(port)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 -- uvicorn offers a flag, no event
                await anyio.sleep(0.01)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        async with httpx.AsyncClient(base_url=url, timeout=args.timeout) as client:
            body = {
                "threadId": "long",
                "runId": "r1",
                "protocolVersion": "1.0",
                "messages": [{"id": "u1", "role": "user", "content": "go"}],
            }
            original = (await client.post("/agent", json=body)).content
            ids = ID.findall(original)
            logged = len(await port.events_after("long", -1))
            print(f"thread: {logged} logged events, {len(ids)} frames, {len(original)} bytes")
            middle = ids[len(ids) // 2].decode()
            for name, headers, params in (
                ("from the start", {}, {"after": "-1"}),
                (f"from the middle ({middle})", {"Last-Event-ID": middle}, {}),
            ):
                times: list[float] = []
                size = frames = 0
                for _ in range(args.reps):
                    started = time.perf_counter()
                    reply = await client.get(
                        "/agent/threads/long/events", headers=headers, params=params
                    )
                    times.append(time.perf_counter() - started)
                    size, frames = len(reply.content), len(ID.findall(reply.content))
                _report(f"HTTP replay {name}", frames, size, times)
            events = await port.events_after("long", -1)
            times = []
            for _ in range(args.reps):
                started = time.perf_counter()
                data = Restream("long", EventId(-1)).take(events)
                times.append(time.perf_counter() - started)
            assert data == original, "the re-rendered thread differs from the original stream"
            _report("in-process re-render (no HTTP, no store)", len(ids), len(data), times)
        server.should_exit = True


def _report(name: str, frames: int, size: int, times: list[float]) -> None:
    median, best = statistics.median(times), min(times)
    print(
        f"{name}: {frames} frames, {size / 1e6:.2f} MB; median {median * 1000:.1f} ms,"
        f" best {best * 1000:.1f} ms; {frames / median:,.0f} frames/s,"
        f" {size / median / 1e6:.1f} MB/s (median)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--storage", default="")
    parsed = parser.parse_args()
    if not parsed.storage:
        parsed.storage = str(Path(tempfile.mkdtemp()) / "resume.db")
    anyio.run(main, parsed)
