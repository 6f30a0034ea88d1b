"""The quality layer end to end: `steerable-bridge acp` and `serve` as users run them, against
a local OpenAI-compatible server whose model writes its tool call as text, or repeats one call.

What a user must see: the text-written call runs (its result reaches the model) and its
markup never appears; a model stuck on one call is stopped with a final answer, the tool
having run once."""

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

from .model_server import FINAL_REPEATER, serve_in_thread

FILE_TEXT = "the launch code is 4711"


@pytest.fixture
def model_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    base, requests, stop = serve_in_thread()
    try:
        yield base, requests
    finally:
        stop()


def _env(base: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    return {**env, "STEERABLE_BASE_URL": base, "STEERABLE_STORAGE": "memory"}


class _Client:
    """Records what an editor shows: message text, tool calls and their statuses, and the
    LoopEvent channel."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: dict[str, str] = {}
        self.statuses: dict[str, list[str]] = {}
        self.kinds: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentMessageChunk):
            self.text.append(update.content.text)
        elif isinstance(update, acp.ToolCallStart):
            self.tools[update.tool_call_id] = update.title
        elif isinstance(update, acp.ToolCallProgress) and update.status:
            self.statuses.setdefault(update.tool_call_id, []).append(update.status)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if "kind" in params:  # `_steerable/event`: the LoopEvent itself
            self.kinds.append(params)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}


async def _acp_turn(
    tmp_path: Path, base: str, model: str, client: _Client | None = None
) -> tuple[_Client, str]:
    (tmp_path / "a.txt").write_text(FILE_TEXT, encoding="utf-8")
    client = client or _Client()
    with anyio.fail_after(60), (tmp_path / "stderr.log").open("wb") as stderr:
        async with spawn_agent_process(
            client,  # type: ignore[arg-type]
            sys.executable,
            "-m", "steerable_bridge.cli", "acp", "--model", f"openai:{model}",
            env=_env(base),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=1, steerable={"events": True})
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            block = acp.TextContentBlock(type="text", text="what does a.txt say?")
            answer = await conn.prompt(session_id=session.session_id, prompt=[block])
            await anyio.sleep(0.05)  # notifications sent just before the response
    return client, answer.stop_reason


def _actions(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["hook"], e["action"]) for e in events if e.get("kind") == "hook_action"]


@pytest.mark.anyio
@pytest.mark.timeout(90)
async def test_acp_runs_a_text_written_call_and_never_shows_its_markup(
    tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, requests = model_server
    client, stop_reason = await _acp_turn(tmp_path, base, "text-caller")
    shown = "".join(client.text)
    assert stop_reason == "end_turn"
    assert "<tool_call>" not in shown and "read_file" not in shown and '"arguments"' not in shown
    assert shown == f"I'll read it.\nThe file says: {FILE_TEXT}"
    (call_id,) = client.tools
    assert client.statuses[call_id][-1] == "completed"
    assert FILE_TEXT in json.dumps(requests[-1]["messages"])  # the model saw the result
    assert ("recovery", "recover_tool_call") in _actions(client.kinds)


@pytest.mark.anyio
@pytest.mark.timeout(90)
async def test_acp_stops_a_model_stuck_repeating_one_call(
    tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, requests = model_server
    client, stop_reason = await _acp_turn(tmp_path, base, "repeater")
    assert stop_reason == "end_turn"
    assert "".join(client.text) == FINAL_REPEATER
    ran = [c for c, statuses in client.statuses.items() if "in_progress" in statuses]
    assert len(ran) == 1 and len(client.tools) == 4  # one run, three answered by dedup
    assert _actions(client.kinds) == [("dedup", "dedup")] * 3 + [("dedup", "steer_out")]
    assert "tools" not in requests[-1]  # the last step offered no tools
    assert len(requests) == 5


def _serve(tmp_path: Path, base: str, model: str) -> subprocess.Popen[str]:
    (tmp_path / "a.txt").write_text(FILE_TEXT, encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--model", f"openai:{model}", "--workspace", str(tmp_path), "--approve", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(base),
        text=True,
    )  # fmt: skip


def _run(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    assert process.stdout is not None
    endpoint = process.stdout.readline().split()[-1]
    base = endpoint.removesuffix("/agent")
    with httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(200):  # bound before the line is printed, listening a moment later
            try:
                client.get("/health")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        body = {
            "threadId": "t1",
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "what does a.txt say?"}],
        }
        reply = client.post("/agent", json=body)
    return [
        json.loads(b.partition("data: ")[2])
        for b in reply.text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


@pytest.mark.timeout(90)
def test_serve_runs_a_text_written_call_and_never_shows_its_markup(
    tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, _ = model_server
    process = _serve(tmp_path, base, "text-caller")
    try:
        frames = _run(process)
    finally:
        process.terminate()
        process.wait(timeout=10)
    shown = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == f"I'll read it.\nThe file says: {FILE_TEXT}"
    starts = [f for f in frames if f["type"] == "TOOL_CALL_START"]
    assert [f["toolCallName"] for f in starts] == ["read_file"]
    results = [f for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert FILE_TEXT in results[0]["content"]
    custom = [f["value"] for f in frames if f["type"] == "CUSTOM"]
    assert ("recovery", "recover_tool_call") in _actions(custom)
    assert frames[-1]["type"] == "RUN_FINISHED"


@pytest.mark.timeout(90)
def test_serve_stops_a_model_stuck_repeating_one_call(
    tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, requests = model_server
    process = _serve(tmp_path, base, "repeater")
    try:
        frames = _run(process)
    finally:
        process.terminate()
        process.wait(timeout=10)
    shown = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == FINAL_REPEATER
    custom = [f["value"] for f in frames if f["type"] == "CUSTOM"]
    assert _actions(custom) == [("dedup", "dedup")] * 3 + [("dedup", "steer_out")]
    assert "tools" not in requests[-1]
    assert frames[-1]["type"] == "RUN_FINISHED"
