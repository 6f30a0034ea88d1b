"""Lone UTF-16 surrogates end to end: `serve` and `acp` as users run them, against a local
OpenAI-compatible server that escapes half an emoji into one chunk and the other half into
the next, and sends lone halves (text and tool-call arguments), and an editor that answers a
file read with a lone half.

What a user must see: the run finishes (RUN_FINISHED / `end_turn`), the split emoji whole,
each lone half as U+FFFD, a `hook_action` saying so — and the next prompt on the same thread
or session works. Before the fix the store refused the event and every later request of the
thread failed until the process restarted."""

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
from acp import RequestError, spawn_agent_process
from acp import schema as acp

from .model_server import serve_in_thread

pytestmark = pytest.mark.slow

GRIN = "\U0001f600"
FFFD = "\ufffd"
FIRST_TEXT = f"Hi {GRIN} lone {FFFD} end"
ARGS = f'{{"path": "{GRIN}{FFFD}.txt"}}'
SECOND_TEXT = f"Read it {FFFD} fine."


@pytest.fixture
def model_server() -> Iterator[str]:
    base, _requests, stop = serve_in_thread()
    try:
        yield base
    finally:
        stop()


def _env(base: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))}
    return {
        **env,
        "STEERABLE_BASE_URL": base,
        "STEERABLE_STORAGE": str(tmp_path / "sessions.db"),  # a store that encodes events
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def _actions(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["hook"], e["action"]) for e in events if e.get("kind") == "hook_action"]


# -- serve -----------------------------------------------------------------------------------


def _frames(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    text = reply.content.decode("utf-8")  # strict: the wire is valid UTF-8
    return [
        json.loads(b.partition("data: ")[2])
        for b in text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


def _post(client: httpx.Client, run_id: str, message_id: str, text: str) -> httpx.Response:
    body = {
        "threadId": "t1",
        "runId": run_id,
        "messages": [{"id": message_id, "role": "user", "content": text}],
    }
    data = json.dumps(body).encode()  # escapes a lone surrogate, as JSON.stringify does
    return client.post("/agent", content=data, headers={"content-type": "application/json"})


@pytest.mark.timeout(90)
def test_serve_finishes_the_run_and_the_thread_keeps_answering(
    tmp_path: Path, model_server: str
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--model", "openai:surrogates", "--workspace", str(tmp_path), "--approve", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(model_server, tmp_path),
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        base = process.stdout.readline().split()[-1].removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(200):  # bound before the line is printed, listening a moment later
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            first = _frames(_post(client, "r1", "u1", "say hi"))
            refused = _post(client, "r2", "u2", "a lone \ud800 from the user")
            second = _frames(_post(client, "r3", "u3", "and again"))
    finally:
        process.terminate()
        process.wait(timeout=10)

    assert first[-1]["type"] == "RUN_FINISHED"
    assert not [f for f in first if f["type"] == "RUN_ERROR"]
    texts = "".join(f["delta"] for f in first if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts == FIRST_TEXT + SECOND_TEXT
    assert "".join(f["delta"] for f in first if f["type"] == "TOOL_CALL_ARGS") == ARGS
    custom = [f["value"] for f in first if f["type"] == "CUSTOM"]
    assert _actions(custom).count(("text_repair", "replace_surrogates")) == 2

    assert refused.status_code == 422  # user input is refused at the wire, with the reason
    assert refused.json()["error"]["reason"] == "lone_surrogate"

    assert second[-1]["type"] == "RUN_FINISHED"
    again = "".join(f["delta"] for f in second if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert again == SECOND_TEXT


# -- acp -------------------------------------------------------------------------------------


class _Editor:
    """Shows message text and tool results; answers every file read with a lone half."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.results: list[str] = []
        self.events: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentMessageChunk):
            self.text.append(update.content.text)
        elif isinstance(update, acp.ToolCallProgress) and update.status == "completed":
            for item in update.content or ():
                if isinstance(item, acp.ContentToolCallContent):
                    self.results.append(item.content.text)

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> Any:
        return acp.ReadTextFileResponse(content="the file's half \ud83d emoji")

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if "kind" in params:  # `_steerable/event`: the LoopEvent itself
            self.events.append(params)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}


@pytest.mark.anyio
@pytest.mark.timeout(90)
async def test_acp_ends_the_turn_and_the_next_prompts_work(
    tmp_path: Path, model_server: str
) -> None:
    editor = _Editor()
    caps = acp.ClientCapabilities(
        fs=acp.FileSystemCapabilities(read_text_file=True, write_text_file=False)
    )
    with anyio.fail_after(60), (tmp_path / "stderr.log").open("wb") as stderr:
        async with spawn_agent_process(
            editor,  # type: ignore[arg-type]
            sys.executable,
            "-m", "steerable_bridge.cli", "acp", "--model", "openai:surrogates",
            env=_env(model_server, tmp_path),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(
                protocol_version=1, client_capabilities=caps, steerable={"events": True}
            )
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id

            def block(text: str) -> list[acp.TextContentBlock]:
                return [acp.TextContentBlock(type="text", text=text)]

            first = await conn.prompt(session_id=session, prompt=block("say hi"))
            await anyio.sleep(0.05)  # notifications sent just before the response
            shown_first = "".join(editor.text)
            with pytest.raises(RequestError) as refused:
                await conn.prompt(session_id=session, prompt=block("lone \udfff"))
            editor.text.clear()
            second = await conn.prompt(session_id=session, prompt=block("and again"))
            await anyio.sleep(0.05)

    assert first.stop_reason == "end_turn"
    assert shown_first == FIRST_TEXT + SECOND_TEXT
    assert editor.results == [f"the file's half {FFFD} emoji"]
    repairs = _actions(editor.events).count(("text_repair", "replace_surrogates"))
    assert repairs == 3  # both model calls of the first turn, the one of the last
    assert refused.value.code == -32602
    assert second.stop_reason == "end_turn"
    assert "".join(editor.text) == SECOND_TEXT
