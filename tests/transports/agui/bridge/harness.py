"""End-to-end pieces for the AG-UI bridge: `steerable-bridge acp --agui-url URL` spawned and
driven by the ACP SDK's client side, in front of a real AG-UI server — our own `serve`
(a child process on 127.0.0.1, port 0, with a scripted model), or `ForeignServer`, a small
Starlette app in the test's event loop that answers each run with events a test gives,
as servers that are not ours do, and records every RunAgentInput it receives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import uvicorn
from acp import schema as acp
from acp import spawn_agent_process
from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.prompt_server import PromptServer

ACP = [sys.executable, "-m", "steerable_bridge.cli", "acp"]


def bridge_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0"}


def write_script(folder: Path, rounds: list[dict[str, Any]]) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps({"rounds": rounds}), encoding="utf-8")
    return path


class EditorSide:
    """The editor: records updates, answers permission requests with `choice`."""

    def __init__(self, choice: str = "allow_once") -> None:
        self.choice = choice
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.seen = anyio.Event()
        """Set at the first agent_message_chunk (for cancel tests)."""

    def text(self, kind: type = acp.AgentMessageChunk) -> str:
        return "".join(u.content.text for u in self.updates if isinstance(u, kind))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if isinstance(update, acp.AgentMessageChunk):
            self.seen.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> acp.RequestPermissionResponse:
        self.permissions.append(tool_call)
        return acp.RequestPermissionResponse(
            outcome=acp.AllowedOutcome(outcome="selected", option_id=self.choice)
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


@asynccontextmanager
async def bridge(
    url: str, editor: EditorSide, cwd: Path, *extra: str, storage: str = "memory"
) -> AsyncIterator[Any]:
    """`acp --agui-url URL` spawned and initialized; yields the client-side connection."""
    async with spawn_agent_process(
        cast(Any, editor),
        ACP[0],
        *ACP[1:],
        "--agui-url",
        url,
        "--storage",
        storage,
        *extra,
        env=bridge_env(),
        cwd=str(cwd),
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _process):
        with anyio.fail_after(30):
            await conn.initialize(protocol_version=1)
        yield conn


def prompt_blocks(text: str) -> list[Any]:
    return [acp.TextContentBlock(type="text", text=text)]


# -- a server that is not ours -----------------------------------------------------------------

Reply = Callable[[dict[str, Any]], Sequence[BaseEvent | str] | Response]
"""A run's answer: SDK events, or raw `data` strings (events the SDK does not know)."""


@dataclass
class ForeignServer:
    """An AG-UI endpoint at `url` answering run N with `replies[N](input)`."""

    url: str
    inputs: list[dict[str, Any]] = field(default_factory=list)


@asynccontextmanager
async def foreign_server(replies: list[Reply]) -> AsyncIterator[ForeignServer]:
    encoder = EventEncoder()
    holder: list[ForeignServer] = []

    async def agent(request: Request) -> Response:
        body = await request.json()
        server = holder[0]
        index = len(server.inputs)
        server.inputs.append(body)
        answer = replies[min(index, len(replies) - 1)](body)
        if isinstance(answer, Response):
            return answer

        async def frames() -> AsyncIterator[str]:
            for event in answer:
                yield f"data: {event}\n\n" if isinstance(event, str) else encoder.encode(event)

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def as_json(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/agent", agent, methods=["POST"]),
            Route("/json", as_json, methods=["POST"]),
        ]
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = PromptServer(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        holder.append(ForeignServer(url=f"http://127.0.0.1:{port}/agent"))
        try:
            yield holder[0]
        finally:
            server.should_exit = True
