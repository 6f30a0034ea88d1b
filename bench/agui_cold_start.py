"""AG-UI cold start: N stored threads of 100 turns each, one new run per thread at once.

1. Build: one template session runs `--turns` turns through a real `Agent` on a
   `SqliteStore` (scripted model: a ~200-token answer streamed in 5-character deltas, and
   every 5th turn a `read_file` call with a 5 KB output first), then its rows are copied
   under N thread ids with one SQL statement each (`bench-0` … `bench-N-1`), so building
   1,000 threads takes seconds and every thread holds exactly what a real one would.
2. Restart: `steerable-bridge serve --storage DB` starts as a fresh process (nothing of
   the threads in memory), is warmed up with 10 sequential runs on new threads, then one
   run per stored thread is sent at once, each on its own loopback connection. The client
   sends only the new user message (`--send-history` sends the whole thread as the client
   holds it, the way CopilotKit and @ag-ui/client resend their messages; `--no-snapshot`
   sends `forwardedProps.steerable.snapshot: false`, a client that keeps its own history).
3. Prints, per N: p50 / p99 / min / max time from sending the request to its first SSE
   event, p99 to RUN_FINISHED, the server's CPU per cold run (from /proc, over the burst),
   its RSS growth per thread once the runs are over and the threads idle, and the bytes
   per run received (for a 100-turn thread almost all of it is the MESSAGES_SNAPSHOT,
   ~256 KB; the run's CUSTOM `steerable.model_request` carries only what changed since the
   thread's previous request — it held the whole request, another ~270 KB, before — so a
   run with `--no-snapshot` is ~9 KB).

Every wait is bounded (`--timeout` per run, 30 s for the server to start). `--src DIR`
runs the server from another checkout (PYTHONPATH), to compare builds on the same store.

    uv run python bench/agui_cold_start.py [--threads 10,100,1000] [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from agui_concurrency import cpu_seconds, free_port, pct
from long_session import _DistinctCalls
from tracing_overhead import wait_until_healthy

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig, new_id
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.turns.turn import LoopSettings, TurnInput
from steerable_bridge.runtime.values import TextPart

ANSWER = " ".join(f"word{i % 97}" for i in range(200))
"""About 200 tokens of answer (1.3 KB)."""
TOOL_OUTPUT = ("the quick brown fox jumps over the lazy dog 0123456789\n" * 100)[:5000]
REPLY = "A short reply to the new message."


async def build_template(db: Path, turns: int) -> str:
    """Run `turns` turns in one session on `db`; return its id."""
    script = Script.model_validate(
        {
            "rounds": [
                {"tool_calls": [{"id": "c", "name": "read_file", "arguments": {"path": "a"}}]},
                {"text": ANSWER, "chunk_size": 5},
                *[{"text": ANSWER, "chunk_size": 5}] * 4,
            ],
            "loop": True,
        }
    )
    provider = _DistinctCalls(ScriptedProvider(script))  # each call its own tool call ids
    router = ModelRouter()
    router.register("bench", lambda name: provider)
    store = SqliteStore(str(db))
    agent = Agent(
        router=router,
        store=store,
        config=AgentConfig(model="bench:m", approval="all", loop=LoopSettings(new_id=new_id)),
    )
    calls = [0]

    async def read(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        calls[0] += 1
        return ToolResult(content=(TextPart(text=TOOL_OUTPUT),))

    agent.tools.register(
        Tool(
            name="read_file",
            description="Read a file",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            kind="read",
            handler=read,
        )
    )
    session = await agent.new_session("/work", session_id="template")
    for turn in range(turns):
        said = (TextPart(text=f"turn {turn}: tell me more"),)
        await session.prompt(TurnInput(content=said, message_id=f"u-{turn}"))
    await agent.aclose()
    return session.id


def copy_threads(db: Path, template: str, count: int) -> None:
    """The template's rows under `bench-0` … `bench-{count-1}` (the same bytes: no event
    row holds its own session id; the session row's id is rewritten and its model dropped:
    the server's default serves the new runs)."""
    with sqlite3.connect(db) as conn:
        for i in range(count):
            conn.execute(
                "INSERT INTO sessions (session_id, cwd, title, model, created_at, updated_at,"
                " last_seq, format, data) SELECT ?, cwd, title, NULL, created_at, updated_at,"
                " last_seq, format, json_remove(json_set(data, '$.session_id', ?), '$.model')"
                " FROM sessions"
                " WHERE session_id = ?",
                (f"bench-{i}", f"bench-{i}", template),
            )
            conn.execute(
                "INSERT INTO events (session_id, seq, kind, run_id, ts, facts, format, data)"
                " SELECT ?, seq, kind, run_id, ts, facts, format, data FROM events"
                " WHERE session_id = ?",
                (f"bench-{i}", template),
            )


def client_messages(db: Path) -> list[dict[str, Any]]:
    """The template thread as an AG-UI client holds it (what `--send-history` sends)."""
    from steerable_bridge.transports.agui.history import thread_messages

    async def read() -> list[dict[str, Any]]:
        store = SqliteStore(str(db))
        events = await store.read("template")
        await store.aclose()
        return [
            m.model_dump(mode="json", by_alias=True, exclude_none=True)
            for m in thread_messages("template", events)
        ]

    return anyio.run(read)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_run(
    port: int,
    thread: str,
    index: int,
    limit_s: float,
    history: list[dict[str, Any]],
    props: dict[str, Any] | None = None,
) -> tuple[float, float, int] | str:
    """One run on its own raw loopback connection: (first event s, end s, bytes)."""
    messages = [*history, {"id": f"u-new-{index}", "role": "user", "content": "hello"}]
    run = {"threadId": thread, "runId": f"run-{index}", "messages": messages}
    body = json.dumps({**run, "forwardedProps": props} if props else run)
    request = (
        f"POST /agent HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body.encode()
    start = time.perf_counter()
    first = None
    data = b""
    try:
        with anyio.fail_after(limit_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(request)
                while chunk := await reader.read(65536):
                    if first is None and b"data: " in chunk:
                        first = time.perf_counter() - start
                    data += chunk
            finally:
                writer.close()
    except (TimeoutError, OSError) as err:
        return f"{type(err).__name__}: {err}"
    if not data.startswith(b"HTTP/1.1 200"):
        return data.split(b"\r\n", 1)[0].decode(errors="replace") or "no response"
    if b'"type":"RUN_FINISHED"' not in data or b'"type":"RUN_ERROR"' in data or first is None:
        return "the stream did not end with RUN_FINISHED: " + data[-300:].decode(errors="replace")
    return first, time.perf_counter() - start, len(data)


async def burst(
    port: int,
    count: int,
    limit_s: float,
    history: list[dict[str, Any]],
    props: dict[str, Any] | None,
) -> tuple[list[tuple[float, float, int]], list[str]]:
    results: list[tuple[float, float, int] | str] = [""] * count

    async def task(i: int) -> None:
        results[i] = await one_run(port, f"bench-{i}", i, limit_s, history, props)

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(task, i)
    return [r for r in results if isinstance(r, tuple)], [r for r in results if isinstance(r, str)]


async def warm_up(port: int, limit_s: float) -> None:
    for i in range(10):  # first-request imports and caches, on new threads: not measured
        await one_run(port, f"warm-{i}", -1 - i, limit_s, [])


def measure(db: Path, count: int, args: argparse.Namespace, history: list[dict[str, Any]]) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "reply.json"
        script.write_text(json.dumps({"rounds": [{"text": REPLY, "chunk_size": 8}], "loop": True}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STEERABLE_"))}
        env |= {"STEERABLE_DEMO_PACE_MS": "0", "STEERABLE_MAX_RUNS": "0"}
        if args.src:
            env["PYTHONPATH"] = args.src
        command = [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", str(port)]
        command += ["--storage", str(db), "--model", f"scripted:{script}", "--approve", "all"]
        server = subprocess.Popen(
            command, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_until_healthy(port, server, 30)
            anyio.run(warm_up, port, args.timeout)
            rss_before = rss_mib(server.pid)
            cpu_before = cpu_seconds(server.pid)
            started = time.perf_counter()
            props = {"steerable": {"snapshot": False}} if args.no_snapshot else None
            good, errors = anyio.run(
                burst,
                port,
                count,
                args.timeout,
                history,
                props,
                backend_options={"use_uvloop": True},
            )
            wall = time.perf_counter() - started
            cpu = cpu_seconds(server.pid) - cpu_before
            time.sleep(0.5)  # the runs' ends settle; the threads are idle now
            rss_after = rss_mib(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
    firsts = [g[0] * 1000 for g in good]
    ends = [g[1] * 1000 for g in good]
    sizes = [g[2] for g in good]
    print(
        f"N={count}: {len(good)} runs ok, {len(errors)} errors"
        + (f" (first: {errors[0][:160]})" if errors else "")
    )
    if firsts:
        print(
            f"  first event: p50 {statistics.median(firsts):.1f} ms  p99 {pct(firsts, 0.99):.1f} ms"
            f"  min {min(firsts):.1f} ms  max {max(firsts):.1f} ms;"
            f"  RUN_FINISHED p99 {pct(ends, 0.99):.1f} ms;  wall {wall:.2f} s"
        )
        print(
            f"  server CPU per cold run {cpu * 1000 / count:.1f} ms;  RSS {rss_before:.0f} →"
            f" {rss_after:.0f} MiB = {(rss_after - rss_before) / count:.2f} MiB per idle thread;"
            f"  {statistics.median(sizes) / 1024:.1f} KiB received per run (median)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="10,100,1000", help="N values, comma separated")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=120.0, help="per run, seconds")
    parser.add_argument("--src", default="", help="run the server from this checkout")
    parser.add_argument(
        "--send-history", action="store_true", help="send the thread's messages with each run"
    )
    parser.add_argument(
        "--no-snapshot",
        action="store_true",
        help="send forwardedProps.steerable.snapshot: false (no MESSAGES_SNAPSHOT)",
    )
    parser.add_argument("--db", default="", help="reuse (or keep) the built store at this path")
    args = parser.parse_args()
    counts = [int(n) for n in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "threads.db"
        built = time.perf_counter()
        if not db.exists():
            anyio.run(build_template, db, args.turns)
            copy_threads(db, "template", max(counts))
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT count(*) FROM events WHERE session_id = 'template'")
            per_thread = rows.fetchone()[0]
        history = client_messages(db) if args.send_history else []
        print(
            f"store: {max(counts)} threads x {args.turns} turns ({per_thread} rows each), built"
            f" in {time.perf_counter() - built:.1f} s; server from {args.src or 'this checkout'};"
            f" client sends {'the whole thread' if args.send_history else 'the new message'}"
            f"{', snapshot: false' if args.no_snapshot else ''}"
        )
        for count in counts:
            copy = Path(tmp) / f"run-{count}.db"  # each N starts from the same stored threads
            with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
                source.backup(target)
            measure(copy, count, args, history)
            for suffix in ("", "-wal", "-shm"):
                Path(str(copy) + suffix).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
