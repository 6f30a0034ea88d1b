"""`session/load` of a long session through the real `steerable-bridge acp` process.

Builds an N-turn session (1,000 by default) in a SQLite store with the real runtime loop and
the scripted model: each answer is ~200 tokens (`"token " * 200`) streamed in token-sized
deltas (6 characters), so the log holds one `text_delta` per token, as a live model leaves
it. Then it spawns `python -m steerable_bridge.cli acp` on that store, connects with the ACP
SDK's client (`spawn_agent_process`), sends `initialize`, and times `session/load`: the wall
time from request to response, the agent process's CPU over it (utime + stime from
/proc/PID/stat), and the `session/update` notifications it replayed (total and per turn).
`--events` also asks for the lossless `_steerable/event` channel, which replays every logged
event. Run: `uv run python bench/acp_load.py [--turns N] [--db PATH] [--events]`; `--db`
keeps the built store and reuses it when it exists (building 1,000 turns takes minutes;
`--build-only` builds it without timing, so only the load needs the benchmark lock).
`--read-every 5` has the model read a 5 KB file (`--read-bytes`) every 5th turn, as in the
figures of issue 26.
While building it prints the builder's RSS (the live session is in it). Before the load it
prints what the store holds for the session: rows, events, the bytes of the data column, of
the events table with its indexes (`dbstat`) and of the whole file, and each against the
text exchanged (user prompts, streamed answer text, tool results).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from acp import schema as acp
from acp import spawn_agent_process

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.adapters.tools.kit import fixed_workspace_tools
from steerable_bridge.commands.model_routes import build_router
from steerable_bridge.commands.storage_choice import build_store
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart

ANSWER = "token " * 200
READ_NAME = "notes.txt"
CHUNK = 6
TICKS = os.sysconf("SC_CLK_TCK")


def _script(folder: Path, read_every: int) -> Path:
    """The scripted model's rounds: an answer a turn; with `read_every` N, every Nth turn
    first reads a file (a `read_file` call, then the answer)."""
    answer = {"text": ANSWER, "chunk_size": CHUNK}
    rounds: list[dict[str, Any]] = [answer]
    if read_every > 0:
        call = {"id": "c1", "name": "read_file", "arguments": {"path": READ_NAME}}
        rounds = [answer] * (read_every - 1) + [{"tool_calls": [call]}, answer]
    path = folder / "script.json"
    path.write_text(json.dumps({"rounds": rounds, "loop": True}))
    return path


async def build(db: Path, route: str, turns: int, cwd: str, read_bytes: int) -> str:
    """A session of `turns` turns in the store at `db`; returns its id. The file the model
    may read (`read_bytes` of text) is written into `cwd` first."""
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    await anyio.Path(cwd, READ_NAME).write_text((line * (read_bytes // len(line) + 1))[:read_bytes])
    agent = Agent(
        router=build_router(route),
        store=build_store(str(db)),
        config=AgentConfig(model=route, approval="all"),
    )
    for tool in fixed_workspace_tools(cwd):
        if tool.name == "read_file":
            agent.tools.register(tool)
    session = await agent.new_session(cwd)
    started = time.perf_counter()
    for turn in range(turns):
        content = (TextPart(text=f"turn {turn}: tell me more"),)
        with anyio.fail_after(60):
            outcome = await session.prompt(TurnInput(content=content))
        if outcome.stop_reason != "end_turn":
            raise SystemExit(f"turn {turn} ended {outcome.stop_reason}: {outcome.error_message}")
        if (turn + 1) % 100 == 0:
            print(
                f"  built {turn + 1} turns ({time.perf_counter() - started:.0f} s),"
                f" builder RSS {_rss_mib():.0f} MiB",
                flush=True,
            )
    await agent.close_session(session.id)
    return session.id


class Counter:
    """An ACP client that counts what the agent sends."""

    def __init__(self) -> None:
        self.updates = 0
        self.kinds: dict[str, int] = {}
        self.events = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1
        self.kinds[update.session_update] = self.kinds.get(update.session_update, 0) + 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a load asks for no permission")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.events += 1

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def on_connect(self, conn: Any) -> None:
        return None


def _text_bytes(events: list[ev.LoopEvent]) -> int:
    """UTF-8 bytes of the text exchanged: prompts, streamed text and reasoning, tool call
    arguments and tool results."""
    total = 0
    for event in events:
        if isinstance(event, ev.UserMessage | ev.ToolFinished):
            parts = event.content
            total += sum(len(p.text.encode()) for p in parts if isinstance(p, TextPart))
        elif isinstance(event, ev.TextDelta | ev.ReasoningDelta | ev.ToolCallDelta):
            total += len(event.delta.encode())
    return total


async def _read(db: Path, session_id: str) -> list[ev.LoopEvent]:
    store = SqliteStore(db)
    try:
        return await store.read(session_id)
    finally:
        store.close()


def storage(db: Path, session_id: str) -> None:
    """Print what the store holds for the session against the text exchanged."""
    events = anyio.run(_read, db, session_id)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows, data = conn.execute(
            "SELECT count(*), sum(length(CAST(data AS BLOB))) FROM events WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        names = ("events", "events_by_seq", "events_by_kind", "events_with_facts")
        (table,) = conn.execute(
            f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({', '.join('?' * len(names))})",
            names,
        ).fetchone()
    size = db.stat().st_size
    text = _text_bytes(events)
    print(
        f"stored: {rows:,} rows for {len(events):,} events; data {data:,} B, events table and"
        f" indexes {table:,} B, file {size:,} B; text exchanged {text:,} B — data"
        f" {data / text:.2f}x, table {table / text:.2f}x, file {size / text:.2f}x the text"
    )


def _rss_mib() -> float:
    """This process's resident memory (the live session that built the log is in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def load(db: Path, route: str, session_id: str, cwd: str, events: bool) -> None:
    client = Counter()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "STEERABLE_STORAGE": str(db),
    }
    command = ("-m", "steerable_bridge.cli", "acp", "--model", route)
    with anyio.fail_after(600):
        async with spawn_agent_process(
            client,
            sys.executable,
            *command,
            env=env,
            cwd=cwd,
            transport_kwargs={"stderr": subprocess.DEVNULL},
        ) as (conn, process):
            meta: dict[str, Any] = {"steerable": {"events": True}} if events else {}
            await conn.initialize(
                protocol_version=1, client_capabilities=acp.ClientCapabilities(), **meta
            )
            cpu = _cpu_s(process.pid)
            started = time.perf_counter()
            await conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=[])
            wall = time.perf_counter() - started
            cpu = _cpu_s(process.pid) - cpu
    _report(client, wall, cpu)


def _report(client: Counter, wall: float, cpu: float) -> None:
    turns = client.kinds.get("user_message_chunk", 0)
    per_turn = client.updates / turns if turns else float("nan")
    print(
        f"session/load of {turns} turns: {client.updates:,} updates ({per_turn:.1f} per turn),"
        f" {client.events:,} _steerable/event notifications, wall {wall:.2f} s,"
        f" agent CPU {cpu:.2f} s"
    )
    print("  updates by kind: " + ", ".join(f"{k} {v:,}" for k, v in sorted(client.kinds.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--db", type=Path, default=None, help="keep (and reuse) the store here")
    parser.add_argument("--events", action="store_true", help="ask for _steerable/event too")
    parser.add_argument("--build-only", action="store_true", help="build --db, time nothing")
    parser.add_argument("--read-every", type=int, default=0, help="read a file every N turns")
    parser.add_argument("--read-bytes", type=int, default=5000, help="the size of that file")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="steerable-load-") as folder:
        work = Path(folder)
        db = options.db or work / "sessions.db"
        script = _script(db.parent if options.db else work, options.read_every)
        route = f"scripted:{script}"
        marker = db.with_suffix(".session")
        if options.db is not None and db.exists() and marker.exists():
            session_id = marker.read_text()
            print(f"reusing {db} (session {session_id})")
        else:
            print(f"building {options.turns} turns of ~200 streamed tokens in {db} ...")
            session_id = anyio.run(build, db, route, options.turns, folder, options.read_bytes)
            marker.write_text(session_id)
        storage(db, session_id)
        if not options.build_only:
            anyio.run(load, db, route, session_id, folder, options.events)


if __name__ == "__main__":
    main()
