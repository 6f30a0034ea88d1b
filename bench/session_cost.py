"""What one turn of a long session costs the agent: CPU, first-token latency, RSS, by length.

One session of `--turns` turns (1,000 by default) through the real `steerable-bridge acp`
process (ACP SDK client, `spawn_agent_process`, SQLite storage), the model a local
OpenAI-compatible server over HTTP (`openai_server.py`, in a thread of this process): every
answer is `--tokens` tokens (200) streamed one token a chunk, and every `--read-every`-th
turn (5) the model first calls `read_file` on a `--read-bytes` (5 KB) file. `--window N`
makes that server a model with an N-token context (`max_model_len` on `/v1/models`, HTTP
400 `context_length_exceeded` over it), so the agent compacts (8,000 is the small window
of issue 26); `--window 0` (the default) leaves the context unbounded, so nothing is
compacted and the request grows.

For every turn it takes the agent process's CPU (utime + stime from /proc/PID/stat, before
and after `session/prompt`), the time from sending the prompt to the first
`agent_message_chunk` of the answer, and whether the turn compacted (the agent renders a
`compaction` as an `agent_message_chunk` whose messageId starts `compaction-`). It prints,
for turns 1-100, 501-600 and 901-1,000 (scaled to `--turns`): the mean agent CPU of a text
turn (no tool call, no compaction), the p50 first-token latency of those turns, the
compaction turns' CPU (mean and max), and the agent's RSS (VmRSS) at the end of the range;
then the ratio of the last range's text-turn CPU to the first's, the mean text-turn CPU of
the ten turns around turn 10 against the last ten (the issue's "turn 10 vs turn 1,000"), and
the storage's bytes on disk (the SQLite file with its WAL, once the agent ended) against the
text exchanged (prompts, answer text received, and the bytes of every file read).

    uv run python bench/session_cost.py [--turns 1000] [--window 8000] [--wire acp|agui]
        [--profile out.prof] [--no-snapshot]

`--wire agui` runs the session as runs on one thread of `steerable-bridge serve` (CPU and
RSS of the server process; first token: the first TEXT_MESSAGE_CONTENT; a compaction: the
CUSTOM `steerable.compaction` event).

`--no-snapshot` (with `--wire agui`) sends `forwardedProps.steerable.snapshot: false` on
every run: a client that keeps its own history and wants no MESSAGES_SNAPSHOT. Without it
the client sends only its newest message, so every run ends with a snapshot of the whole
thread (a client that lacks the history gets all of it).

`--profile` runs the agent (or the server) under cProfile (its CPU figures then include the
profiler's).

Targets (issue 26): text-turn CPU at turn 1,000 within 1.5x of the first turns, with and
without a small window; a compaction turn < 100 ms CPU at any length; RSS at 1,000 turns
without compaction <= 250 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from acp import schema as acp
from acp import spawn_agent_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openai_server import serve_in_thread

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
READ_NAME = "notes.txt"
READ_WORD = "please-read"


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * PAGE / 2**20


@dataclass(slots=True)
class Turn:
    cpu_ms: float
    first_token_ms: float | None
    read: bool
    compacted: bool
    rss: float
    text_chars: int
    """Characters of the prompt, the answer text received and a file read this turn."""


class Client:
    """An ACP client that notes when the answer's first chunk and any compaction arrive."""

    def __init__(self) -> None:
        self.sent = 0.0
        self.first: float | None = None
        self.compacted = False
        self.chars = 0

    def start(self) -> None:
        self.sent = time.perf_counter()
        self.first = None
        self.compacted = False
        self.chars = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update != "agent_message_chunk":
            return
        if (update.message_id or "").startswith("compaction-"):
            self.compacted = True
            return
        if self.first is None:
            self.first = time.perf_counter()
        self.chars += len(getattr(update.content, "text", ""))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def on_connect(self, conn: Any) -> None:
        return None


def _prompt(turn: int, read_every: int) -> tuple[bool, str]:
    """Whether this turn reads the file, and the user's text for it."""
    read = read_every > 0 and turn % read_every == 0
    return read, f"turn {turn}: {READ_WORD} {READ_NAME}" if read else f"turn {turn}: go on"


def stored_bytes(folder: Path) -> int:
    """What the session's SQLite storage takes on disk (the file, its WAL and shm)."""
    return sum(p.stat().st_size for p in folder.glob("s.db*"))


async def acp_session(
    folder: Path, base: str, turns: int, read_every: int, profile: str | None, read_bytes: int
) -> list[Turn]:
    env = _env(folder, base)
    client = Client()
    out: list[Turn] = []
    with (folder / "acp-stderr.log").open("ab") as stderr:
        async with spawn_agent_process(
            client,  # type: ignore[arg-type]
            sys.executable,
            *(("-m", "cProfile", "-o", profile) if profile else ()),
            "-m", "steerable_bridge.cli", "acp", "--model", "openai:bench",
            env=env,
            cwd=folder,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, process):  # fmt: skip
            pid = process.pid
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(folder), mcp_servers=[])).session_id
            for turn in range(1, turns + 1):
                read, text = _prompt(turn, read_every)
                before = cpu_s(pid)
                client.start()
                with anyio.fail_after(120):
                    answer = await conn.prompt(
                        session_id=sid, prompt=[acp.TextContentBlock(type="text", text=text)]
                    )
                if answer.stop_reason != "end_turn":
                    raise SystemExit(f"turn {turn} ended {answer.stop_reason}")
                first = None if client.first is None else (client.first - client.sent) * 1000
                out.append(
                    Turn(
                        cpu_ms=(cpu_s(pid) - before) * 1000,
                        first_token_ms=first,
                        read=read,
                        compacted=client.compacted,
                        rss=rss_mib(pid),
                        text_chars=len(text) + client.chars + (read_bytes if read else 0),
                    )
                )
                if turn % 100 == 0:
                    print(f"  {turn} turns, agent RSS {out[-1].rss:.0f} MiB", flush=True)
    return out


def _env(folder: Path, base: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    return env | {"STEERABLE_BASE_URL": base, "STEERABLE_STORAGE": str(folder / "s.db")}


def agui_session(
    folder: Path,
    base: str,
    turns: int,
    read_every: int,
    read_bytes: int,
    profile: str | None,
    snapshot: bool = True,
) -> list[Turn]:
    """The same session as AG-UI runs on one thread of `steerable-bridge serve`: each turn
    POSTs the new user message and reads the run's SSE stream to its end; the first token
    is the first TEXT_MESSAGE_CONTENT, a compaction the CUSTOM `steerable.compaction`."""
    process = subprocess.Popen(
        [sys.executable, *(("-m", "cProfile", "-o", profile) if profile else ()),
         "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--model", "openai:bench", "--workspace", str(folder), "--approve", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(folder, base),
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    endpoint = process.stdout.readline().split()[-1]
    out: list[Turn] = []
    try:
        with httpx.Client(timeout=120) as client:
            for _ in range(200):
                try:
                    client.get(endpoint.removesuffix("/agent") + "/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            for turn in range(1, turns + 1):
                read, text = _prompt(turn, read_every)
                message = {"id": f"u{turn}", "role": "user", "content": text}
                body: dict[str, Any] = {"threadId": "t1", "runId": f"r{turn}",
                                        "messages": [message]}  # fmt: skip
                if not snapshot:
                    body["forwardedProps"] = {"steerable": {"snapshot": False}}
                before = cpu_s(process.pid)
                sent = time.perf_counter()
                first: float | None = None
                compacted = finished = False
                chars = 0
                with client.stream("POST", endpoint, json=body) as reply:
                    for line in reply.iter_lines():
                        if not line.startswith("data: "):
                            continue
                        if '"TEXT_MESSAGE_CONTENT"' in line:
                            if first is None:
                                first = (time.perf_counter() - sent) * 1000
                            chars += len(json.loads(line[6:]).get("delta", ""))
                        elif '"steerable.compaction"' in line:
                            compacted = True
                        elif '"RUN_FINISHED"' in line:
                            finished = True
                if not finished:
                    raise SystemExit(f"turn {turn} did not finish")
                size = len(text) + chars + (read_bytes if read else 0)
                out.append(Turn((cpu_s(process.pid) - before) * 1000, first, read, compacted,
                                rss_mib(process.pid), size))  # fmt: skip
                if turn % 100 == 0:
                    print(f"  {turn} turns, server RSS {out[-1].rss:.0f} MiB", flush=True)
    finally:
        if profile:  # an interrupted server ends normally, so cProfile writes its stats
            process.send_signal(signal.SIGINT)
        else:
            process.terminate()
        process.wait(timeout=30)
    return out


def _text_cpu(span: list[Turn]) -> float:
    return statistics.fmean(t.cpu_ms for t in span if not t.read and not t.compacted)


def report(turns: list[Turn], window: int, wire: str, stored: int) -> None:
    n = len(turns)
    ranges = [(0, n // 10), (n // 2, n // 2 + n // 10), (n - n // 10, n)]
    label = f"{wire}, window {window}" if window else f"{wire}, no window"
    print(f"\n{label}, {n} turns, {sum(t.compacted for t in turns)} compaction turns")
    print(
        f"{'turns':>11} | {'text CPU ms':>11} | {'1st token p50':>13} |"
        f" {'compaction CPU ms mean/max (n)':>30} | {'RSS MiB':>7}"
    )
    means: list[float] = []
    for start, end in ranges:
        span = turns[start:end]
        text = [t for t in span if not t.read and not t.compacted]
        cpu = statistics.fmean(t.cpu_ms for t in text)
        means.append(cpu)
        first = statistics.median(t.first_token_ms for t in text if t.first_token_ms is not None)
        folds = [t.cpu_ms for t in span if t.compacted]
        fold = f"{statistics.fmean(folds):.1f} / {max(folds):.0f} ({len(folds)})" if folds else "-"
        print(
            f"{start + 1:>5}-{end:<5} | {cpu:>11.1f} | {first:>13.1f} | {fold:>30} |"
            f" {span[-1].rss:>7.0f}"
        )
    folds_all = [t.cpu_ms for t in turns if t.compacted]
    if folds_all:
        print(f"compaction turns overall: max {max(folds_all):.0f} ms CPU")
    print(f"text-turn CPU, last range / first: {means[-1] / means[0]:.2f}x")
    early, late = _text_cpu(turns[5:15]), _text_cpu(turns[-10:])
    print(
        f"text-turn CPU, turns 6-15 {early:.1f} ms, last 10 {late:.1f} ms:"
        f" {late / early:.2f}x (target <= 1.5x)"
    )
    exchanged = sum(t.text_chars for t in turns)
    print(
        f"stored {stored / 2**20:.1f} MiB for {exchanged / 2**20:.1f} MiB of text exchanged:"
        f" {stored / exchanged:.1f}x (target <= 3x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=0, help="model context (0: unbounded)")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--read-every", type=int, default=5)
    parser.add_argument("--read-bytes", type=int, default=5000)
    parser.add_argument("--profile", help="write the agent's cProfile stats to this file")
    parser.add_argument("--wire", choices=("acp", "agui"), default="acp")
    parser.add_argument(
        "--no-snapshot", action="store_true", help="agui: ask for no MESSAGES_SNAPSHOT"
    )
    args = parser.parse_args()
    base, stop = serve_in_thread(
        args.tokens, window=args.window or None, read=READ_NAME, read_if=READ_WORD
    )
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            text = (line * (args.read_bytes // len(line) + 1))[: args.read_bytes]
            (folder / READ_NAME).write_text(text, encoding="utf-8")
            started = time.perf_counter()
            if args.wire == "agui":
                turns = agui_session(
                    folder, base, args.turns, args.read_every, args.read_bytes, args.profile,
                    snapshot=not args.no_snapshot,
                )  # fmt: skip
            else:
                turns = anyio.run(
                    acp_session, folder, base, args.turns, args.read_every, args.profile,
                    args.read_bytes,
                )  # fmt: skip
            print(f"{args.turns} turns in {time.perf_counter() - started:.0f} s")
            wire = f"{args.wire} (no snapshot)" if args.no_snapshot else args.wire
            report(turns, args.window, wire, stored_bytes(folder))
    finally:
        stop()


if __name__ == "__main__":
    main()
