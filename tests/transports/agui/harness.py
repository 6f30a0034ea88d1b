"""Helpers for driving the AG-UI app: an agent on the demo or a scripted model, RunAgentInput
bodies, a POST that returns the decoded SSE frames, and a real uvicorn on 127.0.0.1:0."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.runtime.agent_sessions.agent import Agent
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.ports.permissions import Approval
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.agui.app import create_app
from tests.prompt_server import PromptServer
from tests.runtime.harness import make_agent
from tests.transports.agui.decoding import frames

WRITTEN: dict[str, str] = {}


async def _write_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    WRITTEN[str(args["path"])] = str(args["content"])
    return ToolResult(content=(TextPart(text=f"wrote {args['path']}"),))


WRITE_FILE = Tool(
    name="write_file",
    description="Write a file (test double that needs permission).",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    kind="edit",
    handler=_write_file,
)


async def _slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    await anyio.sleep(30)
    return ToolResult(content=(TextPart(text="done"),))


SLOW = Tool(name="slow", description="Takes 30 s.", kind="think", handler=_slow)


def agent_for(
    provider: ModelProvider | None = None,
    *,
    approval: Approval = "ask",
    tools: Sequence[Tool] = (),
) -> Agent:
    return make_agent(
        provider or DemoProvider(pace_ms=0),
        tools=(*builtin_tools(shared_state=True), WRITE_FILE, *tools),
        approval=approval,
    )


def session_of(app: Starlette, thread_id: str) -> Session | None:
    """The runtime session behind a thread of an app serving a `LocalPort`, if in memory."""
    return app.state.port.agent.get(thread_id)  # type: ignore[no-any-return]


def thread_idle(app: Starlette, thread_id: str) -> bool:
    """Whether a new run could take the thread now (the port would reserve it)."""
    hold = app.state.port.reserve(thread_id)
    if hold is None:
        return False
    hold.release()
    return True


def run_input(
    thread: str, run: str, messages: Sequence[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A RunAgentInput as `HttpAgent` 1.0 sends it (`protocolVersion=None` leaves it out)."""
    body = {"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": list(messages)}
    body.update(extra)
    return {k: v for k, v in body.items() if v is not None}


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


async def post(
    client: httpx.AsyncClient, body: Any, **kwargs: Any
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    with anyio.fail_after(20):
        response = await client.post("/agent", json=body, **kwargs)
    is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
    return response, frames(response.content) if is_sse else []


@contextlib.asynccontextmanager
async def asgi_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


@contextlib.asynccontextmanager
async def live_server(app: Starlette) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1, a free port; yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = PromptServer(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


async def until(condition: Callable[[], object], limit_s: float = 5.0) -> None:
    """Wait (bounded) until `condition()` is true; polls every 10 ms."""
    with anyio.fail_after(limit_s):
        for _ in itertools.count():
            if condition():
                return
            await anyio.sleep(0.01)


def types(wire: Sequence[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in wire]


__all__ = [
    "SLOW",
    "WRITE_FILE",
    "WRITTEN",
    "agent_for",
    "asgi_client",
    "create_app",
    "live_server",
    "post",
    "run_input",
    "session_of",
    "thread_idle",
    "types",
    "until",
    "user",
]
