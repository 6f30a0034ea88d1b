"""Drives the real `steerable-bridge acp` process over stdio with the ACP SDK's client side.

`running(tmp_path, rounds)` writes a scripted-model file, spawns
`python -m steerable_bridge.cli acp --model scripted:FILE --tools-module acp_tools.py` with
`STEERABLE_DEMO_PACE_MS=0`, and yields an `AcpRun`: the SDK connection, the recording
`Client`, and `wire` — every JSON-RPC message in both directions, in wire order, as the
client's connection saw it. The child's stderr goes to a file under tmp_path (read it with
`run.stderr()`), so a chatty child can never block on a full pipe.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import schema as acp
from acp import spawn_agent_process
from acp.connection import StreamDirection, StreamEvent

TOOLS_MODULE = str(Path(__file__).with_name("acp_tools.py"))

Answer = str | Callable[[acp.ToolCallUpdate], Awaitable[str]]
"""An option id to pick, "cancelled", "hang", or an async function returning one."""


class Recorder:
    """A plain ACP client that records what the agent sends and answers as told."""

    def __init__(self, answer: Answer = "allow_once", files: dict[str, str] | None = None):
        self.answer = answer
        self.files = files
        self.updates: list[acp.SessionNotification] = []
        self.permission_requests: list[acp.RequestPermissionRequest] = []
        self.events: list[dict[str, Any]] = []
        self.reads: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(acp.SessionNotification(session_id=session_id, update=update))

    async def request_permission(
        self, options: list[acp.PermissionOption], session_id: str, tool_call: Any, **kw: Any
    ) -> acp.RequestPermissionResponse:
        self.permission_requests.append(
            acp.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=options
            )
        )
        answer = self.answer if isinstance(self.answer, str) else await self.answer(tool_call)
        if answer == "hang":
            await anyio.sleep_forever()
        if answer == "cancelled":
            return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))
        return acp.RequestPermissionResponse(
            outcome=acp.AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> Any:
        self.reads.append(path)
        if self.files is None or path not in self.files:
            from acp import RequestError

            raise RequestError.resource_not_found(path)
        return acp.ReadTextFileResponse(content=self.files[path])

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "steerable/event":
            self.events.append(params)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError(method)

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [
            n.update.session_update
            for n in self.updates
            if session_id is None or n.session_id == session_id
        ]

    def updates_of(self, kind: str) -> list[Any]:
        return [n.update for n in self.updates if n.update.session_update == kind]


@dataclass
class AcpRun:
    conn: Any
    client: Recorder
    process: Any
    tmp: Path
    wire: list[StreamEvent] = field(default_factory=list)

    def stderr(self) -> str:
        return (self.tmp / "agent.stderr").read_text(errors="replace")

    async def init(self, **meta: Any) -> acp.InitializeResponse:
        caps = acp.ClientCapabilities(
            fs=acp.FileSystemCapabilities(
                read_text_file=self.client.files is not None, write_text_file=False
            )
        )
        return await self.conn.initialize(protocol_version=1, client_capabilities=caps, **meta)

    async def new(self, cwd: Path | None = None) -> str:
        response = await self.conn.new_session(cwd=str(cwd or self.tmp), mcp_servers=[])
        sid: str = response.session_id
        return sid

    async def prompt(self, session_id: str, text: str) -> acp.PromptResponse:
        block = acp.TextContentBlock(type="text", text=text)
        return await self.conn.prompt(session_id=session_id, prompt=[block])

    def incoming(self) -> list[dict[str, Any]]:
        return [e.message for e in self.wire if e.direction == StreamDirection.INCOMING]

    def response_index(self, request_method: str) -> tuple[int, dict[str, Any]]:
        """Wire index and message of the (last) response to a request of `request_method`."""
        ids = [
            e.message["id"]
            for e in self.wire
            if e.direction == StreamDirection.OUTGOING and e.message.get("method") == request_method
        ]
        for index in range(len(self.wire) - 1, -1, -1):
            m = self.wire[index].message
            if (
                self.wire[index].direction == StreamDirection.INCOMING
                and "method" not in m
                and m.get("id") in ids
            ):
                return index, m
        raise AssertionError(f"no response to {request_method}")

    async def assert_quiet_after_prompt(self) -> None:
        """No `session/update` follows the last `session/prompt` response on the wire."""
        await anyio.sleep(0.2)  # anything sent after the response would have arrived by now
        index, _ = self.response_index("session/prompt")
        later = [
            e.message for e in self.wire[index + 1 :] if e.message.get("method") == "session/update"
        ]
        assert later == [], f"session/update sent after the prompt response: {later}"

    async def settle(self, count: int, kind: str) -> None:
        """Wait until `count` updates of `kind` arrived."""
        await wait_until(lambda: len(self.client.updates_of(kind)) >= count)


async def wait_until(condition: Callable[[], object]) -> None:
    """Poll what the recorder has seen until `condition()` holds (at most 5 s)."""
    with anyio.fail_after(5.0):
        while not condition():  # noqa: ASYNC110 - the recorder's lists are the state to watch
            await anyio.sleep(0.01)


def write_script(tmp: Path, rounds: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp / "script.json"
    path.write_text(json.dumps({"rounds": rounds, **extra}))
    return path


@asynccontextmanager
async def running(
    tmp: Path,
    rounds: list[dict[str, Any]] | None = None,
    *,
    client: Recorder | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    model: str | None = None,
    **script: Any,
) -> AsyncIterator[AcpRun]:
    if model is None:
        model = f"scripted:{write_script(tmp, rounds or [], **script)}"
    recorder = client or Recorder()
    wire: list[StreamEvent] = []
    child_env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("STEERABLE_", "OPENAI_", "ANTHROPIC_"))
        },
        "STEERABLE_DEMO_PACE_MS": "0",
        "STEERABLE_LOG": "info",
        "STEERABLE_STORAGE": str(tmp / "sessions.db"),
        "XDG_STATE_HOME": str(tmp / "state"),
        **(env or {}),
    }
    command = (
        "-m",
        "steerable_bridge.cli",
        "acp",
        "--model",
        model,
        "--tools-module",
        TOOLS_MODULE,
        *args,
    )
    with (tmp / "agent.stderr").open("wb") as stderr:
        async with spawn_agent_process(
            recorder,
            sys.executable,
            *command,
            env=child_env,
            cwd=tmp,
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 3.0},
            observers=[wire.append],
            use_unstable_protocol=True,
        ) as (conn, process):
            yield AcpRun(conn=conn, client=recorder, process=process, tmp=tmp, wire=wire)


__all__ = ["AcpRun", "Recorder", "running", "wait_until", "write_script"]
