"""MCP over HTTP: a real `MCPServer` (the SDK's FastMCP) served by uvicorn on 127.0.0.1.

The test starts the server's streamable HTTP app (`/mcp`) and its HTTP+SSE app (`/sse`) on
OS-picked ports, mounts each as an `http` / `sse` MCP server, lists and calls its tools,
and checks the configured headers reached the server. A URL nothing listens on is
reported as a problem naming the URL to check, and the session carries on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from steerable_bridge.adapters.tools.mcp import McpServerConfig, open_mcp_servers
from steerable_bridge.runtime.ports.tools import ToolContext
from steerable_bridge.runtime.values import TextPart
from tests.prompt_server import PromptServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool(description="The forecast for a city.")
    def forecast(city: str) -> str:
        return f"sunny in {city}"

    return server


class _SeenHeaders:
    """ASGI middleware that remembers the Authorization header of every request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            self.seen.append(headers.get(b"authorization", b"").decode())
        await self.app(scope, receive, send)


@asynccontextmanager
async def _serving(app: ASGIApp) -> AsyncIterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
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


@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
async def test_an_http_mcp_server_is_mounted_and_its_tools_run(
    transport: Any, path: str, make_ctx: Any
) -> None:
    ctx: ToolContext = make_ctx(None)[0]
    mcp = _server()
    app = _SeenHeaders(mcp.streamable_http_app() if transport == "http" else mcp.sse_app())
    async with _serving(app) as base:
        config = McpServerConfig(
            name="weather",
            transport=transport,
            url=f"{base}{path}",
            headers={"Authorization": "Bearer s3cret"},
        )
        with anyio.fail_after(30):
            async with open_mcp_servers([config]) as (servers, problems):
                assert problems == ()
                (tool,) = servers.tools()
                assert tool.name == "mcp__weather__forecast"
                result = await tool.handler({"city": "Oslo"}, ctx)
    assert result.content == (TextPart(text="sunny in Oslo"),) and result.error is None
    assert app.seen and all(value == "Bearer s3cret" for value in app.seen)


async def test_an_unreachable_url_is_a_problem_naming_what_to_check() -> None:
    async with _serving(_SeenHeaders(_server().streamable_http_app())) as base:
        pass  # the server is gone: its port now refuses connections
    config = McpServerConfig(name="gone", transport="http", url=f"{base}/mcp")
    with anyio.fail_after(30):
        async with open_mcp_servers([config], start_timeout_s=10) as (servers, problems):
            (problem,) = problems
    assert problem.server == "gone" and servers.tools() == ()
    assert "URL" in problem.message


async def test_acp_http_and_sse_entries_reach_the_servers_through_the_session_kit(
    tmp_path: Any, make_ctx: Any
) -> None:
    """ACP `mcpServers` entries of type http and sse, as an editor sends them, become the
    session's tools (`mcp_specs` → `WorkspaceKit.start_mcp`); an `acp` one is refused."""
    from acp import schema

    from steerable_bridge.adapters.tools.kit import WorkspaceKit
    from steerable_bridge.transports.acp.client_env import mcp_specs

    ctx: ToolContext = make_ctx(None)[0]
    mcp = _server()
    async with (
        _serving(mcp.streamable_http_app()) as http_base,
        _serving(mcp.sse_app()) as sse_base,
        anyio.create_task_group() as tg,
    ):
        header = [schema.HttpHeader(name="X-Trace", value="1")]
        servers = [
            schema.HttpMcpServer(type="http", name="web", url=f"{http_base}/mcp", headers=header),
            schema.SseMcpServer(type="sse", name="old", url=f"{sse_base}/sse", headers=[]),
            schema.AcpMcpServer(type="acp", name="inline", server_id="x"),
        ]
        specs, refused = mcp_specs(servers)
        assert [s["transport"] for s in specs] == ["http", "sse"]
        assert len(refused) == 1 and "'inline'" in refused[0]

        def spawn(job: Any) -> None:
            tg.start_soon(job)

        kit = WorkspaceKit(str(tmp_path), (), spawn)
        try:
            with anyio.fail_after(30):
                assert await kit.start_mcp(specs) == ()
            tools = {tool.name: tool for tool in kit.tools()}
            for name in ("mcp__web__forecast", "mcp__old__forecast"):
                result = await tools[name].handler({"city": "Rome"}, ctx)
                assert result.content == (TextPart(text="sunny in Rome"),)
        finally:
            await kit.aclose()
