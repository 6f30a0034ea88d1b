"""Time to first render of a long thread in the chat page (headless Chromium, loopback).

Builds one thread of about `--events` logged events on the demo model (each turn: reasoning,
a `calculate` tool call and its result, a streamed answer) in an SQLite store, served by the
AG-UI app under uvicorn on 127.0.0.1, then opens it in the built-in chat page `--reps` times
(`agui_page_open.mjs`, a fresh browser context each time, the thread remembered in
localStorage as after a reload) and prints the median and best ms from navigation start
until the first message is drawn and until the whole thread is (every user message shown,
status idle). Needs node, `tests/interop/node_modules` (playwright-core) and
/usr/bin/chromium. Every wait is bounded.
Run: `uv run python bench/agui_page_open.py [--events 10000] [--reps 5]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import uvicorn

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.transports.agui.app import create_app

HERE = Path(__file__).resolve().parent
THREAD = "long-thread"


def _agent(storage: str) -> Agent:
    router = ModelRouter()
    router.register("demo", lambda name: DemoProvider(pace_ms=0))
    agent = Agent(router=router, store=SqliteStore(storage), config=AgentConfig(model="demo:m"))
    for tool in builtin_tools(shared_state=True):
        agent.tools.register(tool)
    return agent


async def _build(client: httpx.AsyncClient, port: LocalPort, events: int) -> int:
    """Runs turns on THREAD until its log holds `events` events; returns the turns run."""
    turns, logged = 0, 0
    messages: list[dict[str, object]] = []
    while logged < events:
        turns += 1
        user = {"id": f"u{turns}", "role": "user", "content": f"think, then use a tool ({turns})"}
        body = {
            "threadId": THREAD,
            "runId": f"r{turns}",
            "protocolVersion": "1.0",
            "messages": [*messages, user],
        }
        reply = await client.post("/agent", json=body)
        reply.raise_for_status()
        messages = (await client.get(f"/agent/threads/{THREAD}")).json()["messages"]
        logged = len(await port.events_after(THREAD, -1))
    return turns


async def main(args: argparse.Namespace) -> None:
    port = LocalPort(_agent(args.storage))
    config = uvicorn.Config(
        create_app(port), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 -- uvicorn offers a flag, no event
                await anyio.sleep(0.01)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        async with httpx.AsyncClient(base_url=url, timeout=args.timeout) as client:
            started = time.perf_counter()
            turns = await _build(client, port, args.events)
            logged = len(await port.events_after(THREAD, -1))
            built_s = time.perf_counter() - started
            sizes: dict[str, int] = {}
            took: dict[str, list[float]] = {}
            for name, path in (
                ("snapshot", f"/agent/threads/{THREAD}"),
                ("full replay", f"/agent/threads/{THREAD}/events?after=-1"),
            ):
                for _ in range(args.reps):
                    began = time.perf_counter()
                    sizes[name] = len((await client.get(path)).content)
                    took.setdefault(name, []).append(time.perf_counter() - began)
        print(f"thread: {logged} logged events, {turns} turns (built in {built_s:.1f} s)")
        for name, size in sizes.items():
            print(
                f"GET {name}: {size / 1e6:.2f} MB, median"
                f" {statistics.median(took[name]) * 1000:.0f} ms (httpx, no page)"
            )
        with anyio.fail_after(args.timeout * (args.reps + 1)):
            done = await anyio.run_process(
                ["node", str(HERE / "agui_page_open.mjs"), f"{url}/", THREAD, str(turns),
                 str(args.reps)],
                check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(done.stderr.decode(errors="replace")[-3000:])
        loads = json.loads(done.stdout.decode().strip().splitlines()[-1])
        for name in ("firstMs", "wholeMs"):
            times = [load[name] for load in loads]
            print(
                f"{'first message drawn' if name == 'firstMs' else 'whole thread shown, idle'}:"
                f" median {statistics.median(times):.0f} ms, best {min(times):.0f} ms"
                f" ({len(times)} loads)"
            )
        print(f"drawn: {loads[-1]['users']} user messages, {loads[-1]['cards']} tool cards")
        server.should_exit = True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--storage", default="")
    parsed = parser.parse_args()
    if not parsed.storage:
        parsed.storage = str(Path(tempfile.mkdtemp()) / "page.db")
    anyio.run(main, parsed)
