"""Long sessions end to end: `steerable-bridge acp` and `serve` against a local
OpenAI-compatible server that enforces a small context window (HTTP 400
`context_length_exceeded`, as vLLM and OpenAI answer) and reports it on `/v1/models`.

What a user must see: every prompt of a long session with a large tool output per turn
succeeds — pressure compaction keeps each request inside the window — and a session loaded
in a new process replays and continues from the summary. Fewer turns than the bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from acp import schema as acp
from acp import spawn_agent_process

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from openai_server import serve_in_thread

WINDOW = 4000
TURNS = 12
BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(24))


@pytest.fixture
def small_window() -> Iterator[str]:
    base, stop = serve_in_thread(20, window=WINDOW, read="big.txt")
    try:
        yield base
    finally:
        stop()


def _env(base: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    return {**env, "STEERABLE_BASE_URL": base, "STEERABLE_STORAGE": str(tmp_path / "s.db")}


class _Client:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.sizes: list[int] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.UsageUpdate):
            self.sizes.append(update.size)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if "kind" in params:
            self.events.append(params)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}


async def _acp(tmp_path: Path, base: str, prompts: list[str], load: str | None = None) -> Any:
    client = _Client()
    stops: list[str] = []
    with anyio.fail_after(120), (tmp_path / "stderr.log").open("ab") as stderr:
        async with spawn_agent_process(
            client,  # type: ignore[arg-type]
            sys.executable,
            "-m", "steerable_bridge.cli", "acp", "--model", "openai:bench",
            env=_env(base, tmp_path),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=1, steerable={"events": True})
            if load is None:
                sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            else:
                await conn.load_session(session_id=load, cwd=str(tmp_path), mcp_servers=[])
                sid = load
            for text in prompts:
                block = acp.TextContentBlock(type="text", text=text)
                answer = await conn.prompt(session_id=sid, prompt=[block])
                stops.append(answer.stop_reason)
            await anyio.sleep(0.05)
    return client, sid, stops


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_acp_long_session_never_fails_for_context_and_reloads(
    tmp_path: Path, small_window: str
) -> None:
    (tmp_path / "big.txt").write_text(BIG, encoding="utf-8")
    prompts = [f"read big.txt again ({turn})" for turn in range(TURNS)]
    client, sid, stops = await _acp(tmp_path, small_window, prompts)
    assert stops == ["end_turn"] * TURNS, (tmp_path / "stderr.log").read_text()
    folds = [e for e in client.events if e["kind"] == "compaction"]
    assert folds and {f["trigger"] for f in folds} <= {"pressure", "overflow"}
    assert any(f["trigger"] == "pressure" for f in folds)
    assert all(f["post_tokens"] < f["pre_tokens"] for f in folds)
    assert not any(e["kind"] == "run_failed" for e in client.events)
    assert set(client.sizes) == {WINDOW}  # discovered from /v1/models, shown to the editor

    again, _, stops = await _acp(tmp_path, small_window, ["and once more"], load=sid)
    assert stops == ["end_turn"]
    replayed = [e for e in again.events if e["kind"] == "compaction"]
    assert replayed  # session/load replays the tail from the newest compaction
    requests = [e for e in again.events if e["kind"] == "model_request"]
    first = requests[-1]["request"]["messages"][0]["content"][0]["text"]
    assert first.startswith("Summary of the conversation so far:")


def _serve(tmp_path: Path, base: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--model", "openai:bench", "--workspace", str(tmp_path), "--approve", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(base, tmp_path),
        text=True,
    )  # fmt: skip


def _frames(reply: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(b.partition("data: ")[2])
        for b in reply.text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


@pytest.mark.timeout(180)
def test_serve_long_thread_never_fails_for_context_and_compacts_on_command(
    tmp_path: Path, small_window: str
) -> None:
    (tmp_path / "big.txt").write_text(BIG, encoding="utf-8")
    process = _serve(tmp_path, small_window)
    runs: list[list[dict[str, Any]]] = []
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().split()[-1]
        with httpx.Client(base_url=endpoint.removesuffix("/agent"), timeout=60) as client:
            for _ in range(200):
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            for turn in range(TURNS):
                message = {"id": f"u{turn}", "role": "user", "content": f"read big.txt ({turn})"}
                body = {"threadId": "t1", "runId": f"r{turn}", "messages": [message]}
                runs.append(_frames(client.post("/agent", json=body)))
            command = {"steerable": {"command": "compact"}}
            body = {"threadId": "t1", "runId": "rc", "messages": [], "forwardedProps": command}
            runs.append(_frames(client.post("/agent", json=body)))
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert all(run[-1]["type"] == "RUN_FINISHED" for run in runs), runs[-1]
    assert not any(f["type"] == "RUN_ERROR" for run in runs for f in run)
    folds = [
        f["value"]
        for run in runs
        for f in run
        if f["type"] == "CUSTOM" and f["name"] == "steerable.compaction"
    ]
    assert any(f["trigger"] == "pressure" for f in folds)
    assert folds[-1]["trigger"] == "manual"  # the command's own run
