"""Long sessions end to end, at full length: `acp` and `serve` for `--turns` turns each.

The proof of issue 13 that CI runs with 12 turns (`tests/commands/test_long_session_e2e.py`)
at the length the issue asks for: a local OpenAI-compatible server (`openai_server.py`)
enforces a `--window`-token context (HTTP 400 `context_length_exceeded`, `max_model_len` on
`/v1/models`) and calls `read_file` on a 24-line file every turn, so the session grows by a
tool output per turn. For each wire it prints the turns that ended normally and those that
failed, the compactions by trigger, the wall time, the session's stored bytes against its
payload (as `long_session.py` counts them) — and for ACP, whether `session/load` in a new
process replays the session and continues; for AG-UI, whether a thread continues after the
server restarted.

    uv run python bench/long_session_e2e.py [--turns 300] [--wire acp|agui|both]

Nothing here is a test double: the agent processes are the real CLI, with SQLite storage.
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
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
from acp import schema as acp
from acp import spawn_agent_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openai_server import serve_in_thread

BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(24))


def _env(base: str, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    return {**env, "STEERABLE_BASE_URL": base, "STEERABLE_STORAGE": str(folder / "s.db")}


def _stored(folder: Path, session_id: str) -> tuple[int, int]:
    """(bytes in the data column of the session's rows, payload bytes: prompts, answers and
    tool output text), as bench/long_session.py counts them."""
    with sqlite3.connect(folder / "s.db") as conn:
        stored = conn.execute(
            "SELECT sum(length(data)) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
    out = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "sessions", "export", session_id,
         "--storage", str(folder / "s.db")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    payload = 0
    for line in out.stdout.splitlines():
        event = json.loads(line)
        if event["kind"] in ("user_message", "tool_finished"):
            texts = [p.get("text", "") for p in event["content"] if p.get("type") == "text"]
            payload += sum(len(t.encode()) for t in texts)
        elif event["kind"] == "text_delta":
            payload += len(event["delta"].encode())
    return int(stored or 0), payload


class _Client:
    """An ACP client that allows nothing and records the event channel."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if "kind" in params:
            self.events.append(params)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}


async def _acp_process(
    folder: Path, base: str, prompts: list[str], load: str | None = None
) -> tuple[_Client, str, list[str]]:
    client = _Client()
    stops: list[str] = []
    with (folder / "acp-stderr.log").open("ab") as stderr:
        async with spawn_agent_process(
            client,  # type: ignore[arg-type]
            sys.executable,
            "-m", "steerable_bridge.cli", "acp", "--model", "openai:bench",
            env=_env(base, folder),
            cwd=folder,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=1, steerable={"events": True})
            if load is None:
                sid = (await conn.new_session(cwd=str(folder), mcp_servers=[])).session_id
            else:
                await conn.load_session(session_id=load, cwd=str(folder), mcp_servers=[])
                sid = load
            for text in prompts:
                with anyio.fail_after(120):
                    answer = await conn.prompt(
                        session_id=sid, prompt=[acp.TextContentBlock(type="text", text=text)]
                    )
                stops.append(answer.stop_reason)
    return client, sid, stops


def _report(
    wire: str, stops: list[str], folds: list[dict[str, Any]], failed: int, seconds: float
) -> None:
    ended = Counter(stops)
    triggers = Counter(f["trigger"] for f in folds)
    print(
        f"{wire}: {len(stops)} turns in {seconds:.1f} s; ended {dict(ended)}; {failed} run_failed;"
        f" compactions {dict(triggers)}"
    )


def acp_wire(turns: int, base: str, folder: Path) -> None:
    prompts = [f"read big.txt again ({turn})" for turn in range(turns)]
    started = time.perf_counter()
    client, sid, stops = anyio.run(_acp_process, folder, base, prompts)
    seconds = time.perf_counter() - started
    folds = [e for e in client.events if e["kind"] == "compaction"]
    failed = sum(e["kind"] == "run_failed" for e in client.events)
    _report("acp", stops, folds, failed, seconds)
    started = time.perf_counter()
    again, _, more = anyio.run(_acp_process, folder, base, ["and once more"], sid)
    replayed = sum(1 for e in again.events if e["kind"] != "model_request")
    print(
        f"acp: session/load in a new process replayed {replayed} events and the next prompt"
        f" ended {more[0]} ({time.perf_counter() - started:.1f} s with process start)"
    )
    stored, payload = _stored(folder, sid)
    print(f"acp: stored {stored:,} bytes for {payload:,} payload bytes ({stored / payload:.2f})")


def _serve(folder: Path, base: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--model", "openai:bench", "--workspace", str(folder), "--approve", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(base, folder),
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    endpoint = process.stdout.readline().split()[-1].removesuffix("/agent")
    with httpx.Client(base_url=endpoint, timeout=10) as probe:
        for _ in range(200):
            try:
                probe.get("/health")
                break
            except httpx.TransportError:
                time.sleep(0.05)
    return process, endpoint


def _frames(reply: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(b.partition("data: ")[2])
        for b in reply.text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


def _run(client: httpx.Client, turn: int | str, text: str) -> list[dict[str, Any]]:
    message = {"id": f"u{turn}", "role": "user", "content": text}
    body = {"threadId": "t1", "runId": f"r{turn}", "messages": [message]}
    return _frames(client.post("/agent", json=body))


def agui_wire(turns: int, base: str, folder: Path) -> None:
    runs: list[list[dict[str, Any]]] = []
    process, endpoint = _serve(folder, base)
    started = time.perf_counter()
    try:
        with httpx.Client(base_url=endpoint, timeout=120) as client:
            for turn in range(turns):
                runs.append(_run(client, turn, f"read big.txt ({turn})"))
    finally:
        process.terminate()
        process.wait(timeout=10)
    seconds = time.perf_counter() - started
    ends = [run[-1]["type"] if run else "nothing" for run in runs]
    folds = [
        f["value"]
        for run in runs
        for f in run
        if f["type"] == "CUSTOM" and f["name"] == "steerable.compaction"
    ]
    failed = sum(f["type"] == "RUN_ERROR" for run in runs for f in run)
    _report("agui", ends, folds, failed, seconds)
    process, endpoint = _serve(folder, base)
    try:
        with httpx.Client(base_url=endpoint, timeout=120) as client:
            again = _run(client, "again", "and once more")
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(f"agui: after a server restart the thread's next run ended {again[-1]['type']}")
    stored, payload = _stored(folder, "t1")
    print(f"agui: stored {stored:,} bytes for {payload:,} payload bytes ({stored / payload:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--wire", choices=("acp", "agui", "both"), default="both")
    args = parser.parse_args()
    base, stop = serve_in_thread(20, window=args.window, read="big.txt")
    try:
        for wire, run in (("acp", acp_wire), ("agui", agui_wire)):
            if args.wire in (wire, "both"):
                with tempfile.TemporaryDirectory() as tmp:
                    folder = Path(tmp)
                    (folder / "big.txt").write_text(BIG, encoding="utf-8")
                    run(args.turns, base, folder)
    finally:
        stop()


if __name__ == "__main__":
    main()
