"""PostgreSQL store: append events/s, load of a 10,000-event session, and two servers on it.

1. Append: 50,000 text deltas appended to one session in batches of `--batch` events (the
   loop commits deltas in batches), then 2,000 events one per transaction (the cost of a
   structural commit).
2. Load: `Agent.load_session` of a 10,000-event session by a fresh agent on a fresh store
   (pool opened first, as a running server has it), best of 7; and the tail read of a
   session compacted near its end.
3. With `--serve N`: two `steerable-bridge serve` processes on different ports share the
   database; N concurrent runs go to each (2N in all, each on its own thread), then every
   session is checked: `sessions check` must be clean, and each thread's log must hold
   exactly one run with seqs 0, 1, 2, ... (nothing lost, nothing written twice).

Uses `--url postgresql://...`, or starts a throwaway server (tests/pg.py; initdb / pg_ctl
from the Debian postgresql package) on loopback and removes it afterwards.

    uv run python bench/postgres_store.py [--url URL] [--serve 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steerable_bridge.adapters.storage.postgres import PostgresStore  # noqa: E402
from steerable_bridge.runtime import events as ev  # noqa: E402
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig  # noqa: E402
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter  # noqa: E402
from steerable_bridge.runtime.ports.storage import SessionRecord, read_tail  # noqa: E402
from steerable_bridge.runtime.values import TextPart  # noqa: E402
from tests.pg import PgServer, find_bindir  # noqa: E402

TEXT = "Hello from the scripted model, streamed in small pieces."


def session_events(sid: str, count: int, *, compact_at: int | None = None) -> list[ev.LoopEvent]:
    """Turns of 90 text deltas each (run, user message, step, text, run end)."""
    out: list[ev.LoopEvent] = []

    def add(cls: type[ev.EventBase], run: str, **fields: object) -> None:
        out.append(cls(session_id=sid, run_id=run, seq=len(out), ts=1000 + len(out), **fields))  # type: ignore[arg-type]

    turn = 0
    while len(out) < count:
        run = f"r{turn}"
        add(ev.RunStarted, run, model="m")
        add(ev.UserMessage, run, message_id=f"u{turn}", content=(TextPart(text="go on"),))
        if compact_at is not None and turn == compact_at:
            add(ev.Compaction, run, summary="earlier turns", through_seq=len(out) - 1)
        add(ev.StepStarted, run, step=1)
        add(ev.TextStart, run, message_id=f"m{turn}")
        for _ in range(90):
            add(ev.TextDelta, run, message_id=f"m{turn}", delta="word ")
        add(ev.TextEnd, run, message_id=f"m{turn}")
        add(ev.StepFinished, run, step=1, finish_reason="end_turn")
        add(ev.RunFinished, run, stop_reason="end_turn")
        turn += 1
    return out


async def appends(url: str, batch: int) -> None:
    store = PostgresStore(url)
    try:
        await store.create(SessionRecord(session_id="append", cwd="/b", created_at=0, updated_at=0))
        deltas = [
            ev.TextDelta(session_id="append", run_id="r", seq=i, ts=i, message_id="m", delta="w ")
            for i in range(50_000)
        ]
        start = time.perf_counter()
        for at in range(0, len(deltas), batch):
            await store.append("append", deltas[at : at + batch])
        rate = len(deltas) / (time.perf_counter() - start)
        print(f"append, {batch} events per transaction: {rate:>10,.0f} events/s (target 50,000)")
        single = [
            ev.TextDelta(
                session_id="append", run_id="r", seq=50_000 + i, ts=i, message_id="m", delta="w"
            )
            for i in range(2000)
        ]
        start = time.perf_counter()
        for event in single:
            await store.append("append", [event])
        per = (time.perf_counter() - start) / len(single)
        rate = 1 / per
        print(f"append, 1 event per transaction: {rate:>10,.0f} events/s ({per * 1000:.2f} ms)")
    finally:
        await store.aclose()


async def loads(url: str, count: int) -> None:
    writer = PostgresStore(url)
    try:
        for sid, compact in (("load", None), ("tail", count // 96 - 3)):
            await writer.create(SessionRecord(session_id=sid, cwd="/b", created_at=0, updated_at=0))
            events = session_events(sid, count, compact_at=compact)
            for at in range(0, len(events), 1000):
                await writer.append(sid, events[at : at + 1000])
    finally:
        await writer.aclose()
    times: list[float] = []
    size = 0
    for _ in range(7):
        store = PostgresStore(url)
        await store.get("load")  # the pool is open in a running server
        agent = Agent(router=ModelRouter(), store=store, config=AgentConfig())
        start = time.perf_counter()
        session = await agent.load_session("load")
        times.append((time.perf_counter() - start) * 1000)
        size = len(session.log)
        await store.aclose()
    print(f"load_session, {size:,} events: {min(times):8.1f} ms (best of 7; target < 50 ms)")
    store = PostgresStore(url)
    try:
        tails: list[float] = []
        for _ in range(7):
            start = time.perf_counter()
            tail = await read_tail(store, "tail")
            tails.append((time.perf_counter() - start) * 1000)
        tails.sort()
        print(
            f"read_tail, {count:,} events compacted 3 turns from the end: {tails[3]:6.1f} ms"
            f" for {len(tail):,} events (median of 7)"
        )
    finally:
        await store.aclose()


def start_serve(url: str, script: Path) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0", "--storage", url,
         "--model", f"scripted:{script}", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, cwd=script.parent,
    )  # fmt: skip
    assert process.stdout is not None
    port = int(process.stdout.readline().split()[-1].rsplit(":", 1)[1].split("/")[0])
    return process, port


async def one_run(port: int, thread: str) -> str | None:
    body = json.dumps(
        {
            "threadId": thread,
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        }
    ).encode()
    request = (
        f"POST /agent HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body  # fmt: skip
    data = b""
    try:
        with anyio.fail_after(120):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            while chunk := await reader.read(65536):
                data += chunk
            writer.close()
    except (TimeoutError, OSError) as err:
        return f"{type(err).__name__}: {err}"
    if not data.startswith(b"HTTP/1.1 200") or b'"type":"RUN_FINISHED"' not in data:
        return data[:200].decode(errors="replace")
    return None


def healthy(port: int) -> None:
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"the server on port {port} did not start")


async def two_servers(url: str, runs: int, script: Path) -> None:
    servers = [start_serve(url, script), start_serve(url, script)]
    try:
        for _, port in servers:
            await anyio.to_thread.run_sync(healthy, port)
        results: list[str | None] = []
        start = time.perf_counter()

        async def run(port: int, thread: str) -> None:
            results.append(await one_run(port, thread))

        async with anyio.create_task_group() as tg:
            for n in range(runs):
                for index, (_, port) in enumerate(servers):
                    tg.start_soon(run, port, f"s{index}-t{n}")
        wall = time.perf_counter() - start
        errors = [r for r in results if r is not None]
        print(
            f"two serve processes x {runs} concurrent runs on one PostgreSQL: {len(errors)} errors"
            f" in {len(results)} runs, {wall:.1f} s" + (f" (first: {errors[0]})" if errors else "")
        )
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=30)
    checked = await anyio.run_process(
        [sys.executable, "-m", "steerable_bridge.cli", "sessions", "check", "--storage", url],
        check=False,
    )
    lines = checked.stdout.decode().strip().splitlines()
    print("sessions check:", lines[0], "/", lines[-1], f"(exit {checked.returncode})")
    store = PostgresStore(url)
    bad = 0
    try:
        for index in range(2):
            for n in range(runs):
                log = await store.read(f"s{index}-t{n}")
                seqs = [e.seq for e in log]
                started = sum(isinstance(e, ev.RunStarted) for e in log)
                finished = sum(isinstance(e, ev.RunFinished) for e in log)
                if seqs != list(range(len(log))) or started != 1 or finished != 1:
                    bad += 1
    finally:
        await store.aclose()
    print(f"threads with a lost or duplicated event, or not exactly one run: {bad} of {2 * runs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="", help="postgresql://... (default: a throwaway server)")
    parser.add_argument("--batch", type=int, default=100, help="events per append (100)")
    parser.add_argument("--load-events", type=int, default=10_000)
    parser.add_argument("--serve", type=int, default=0, help="runs per server (0: skip)")
    args = parser.parse_args()
    server = None
    url = args.url
    if not url:
        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("no PostgreSQL binaries; pass --url or install postgresql")
        server = PgServer(bindir)
        server.start()
    try:
        anyio.run(appends, url or server.database(), args.batch)  # type: ignore[union-attr]
        anyio.run(loads, url or server.database(), args.load_events)  # type: ignore[union-attr]
        if args.serve:
            with tempfile.TemporaryDirectory() as tmp:
                script = Path(tmp) / "script.json"
                script.write_text(
                    json.dumps({"rounds": [{"text": TEXT, "chunk_size": 8}], "loop": True})
                )
                target = url or server.database()  # type: ignore[union-attr]
                anyio.run(two_servers, target, args.serve, script)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
