"""MCP servers as tools: connect to MCP servers with the official `mcp` SDK and offer their tools.

`McpServers(spawn)` holds one session's servers. `start(configs)` launches each server in a
task handed to `spawn` (the transport's task group owns it), waits — at most
`start_timeout_s` — until it has answered `initialize` and `tools/list`, and returns an
`McpProblem` for every server that failed or timed out — and one (`mcp_tools_capped`) for
a server whose tool list was cut to `limits` (`mcp_limits.py`: count, name length, schema
size) — so the transport can tell the user while the session carries on without them.
`tools()` offers the rest to the model as `mcp__<server>__<tool>`: kind `read` (or `fetch`
for open-world tools) when the server marks a tool read-only, `other` — which always asks
permission — otherwise. Each call is bounded by `call_timeout_s`, and ended at once
(`mcp_unreadable_answer`) when the server sends a message the SDK cannot parse — the SDK
drops it, and the answer with it (its parser refuses a lone UTF-16 surrogate escape, for
one). A server's descriptions and schemas have lone surrogates replaced with U+FFFD here;
its results go through the loop's repair of every tool result (`runtime/tool_calls/tool_batch.py`),
which says so in a `hook_action`. `aclose()` stops every server (the SDK closes stdin, then
kills the process group, each step bounded) and waits for their tasks, at most
`stop_timeout_s`. A server's stderr goes to a temporary file whose tail explains a
failure. `open_mcp_servers` is the same with its own task group, for commands and tests.
A server is reached over stdio (a command this process starts), streamable HTTP (`http`: a
URL) or the older HTTP+SSE transport (`sse`), each through the SDK's own client transport,
with the configured headers on every request. A stdio config's `sandbox` says what confines
it (`kit.py` puts its command inside bubblewrap), and its tools report that on every call;
an unsandboxed one's `held` (`containment.py`) is killed when it stops, and when this
process dies (`deathwatch.py`), so what it started by `setsid` does not outlive it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, cast

import anyio
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import JsonValue

from steerable_bridge.adapters.tools.containment import Containment
from steerable_bridge.adapters.tools.deathwatch import watch_group
from steerable_bridge.adapters.tools.mcp_limits import McpLimits, cap_tools
from steerable_bridge.runtime.encoding.strict_json import scrub
from steerable_bridge.runtime.encoding.surrogates import scrub as scrub_text
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import (
    ImagePart,
    ResourcePart,
    Sandbox,
    TextPart,
    ToolContent,
    ToolError,
    ToolKind,
    canonical_json,
)

__all__ = ["McpProblem", "McpServerConfig", "McpServers", "mcp_tool_name", "open_mcp_servers"]

log = logging.getLogger(__name__)

Spawn = Callable[[Callable[[], Awaitable[None]]], None]
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64
DEFAULT_LIMITS = McpLimits()


McpTransport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    """How to reach one MCP server: a command (stdio) or a URL (`http`, `sse`).

    The ACP shapes `McpServerStdio`, `McpServerHttp` and `McpServerSse`, in plain values.
    """

    name: str
    transport: McpTransport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    sandbox: Sandbox = "none"
    """What confines a stdio server (`command` is then the sandbox's command line)."""
    held: Containment | None = None
    """What holds an unsandboxed stdio server's processes (its command already joins it):
    killed when the server stops, and by a deathwatch if this process dies."""

    def describe(self) -> str:
        """What to check when it fails: its command, or its URL."""
        if self.transport != "stdio":
            return "its URL and headers"
        if self.sandbox == "bwrap":
            return (
                "its command and arguments (it runs in the sandbox: the workspace is writable,"
                " the rest read-only, your home folder and /tmp are hidden; set"
                " _meta.steerable.network to true if it needs the network, or pass --sandbox off)"
            )
        return "its command and arguments"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpProblem:
    """A server that could not be mounted: stable `code` and a message for the user."""

    server: str
    code: str
    message: str


def mcp_tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, characters models reject replaced by `_`, at most 64 long.

    A longer name keeps its first 55 characters and gains a short hash of the full name,
    so two long names stay distinct (model APIs reject tool names over 64 characters).
    """
    name = f"mcp__{_NAME_UNSAFE.sub('_', server)}__{_NAME_UNSAFE.sub('_', tool)}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


@dataclass(slots=True)
class _Server:
    config: McpServerConfig
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    settled: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    tools: tuple[mcp_types.Tool, ...] = ()
    problem: McpProblem | None = None
    capped: str | None = None
    """Why some of its tools are not offered (`mcp_limits.py`), or None."""
    calls: set[anyio.CancelScope] = field(default_factory=set)
    """The calls waiting for an answer (a message the SDK cannot read ends them)."""
    unreadable: str | None = None
    """What the SDK said about the last message from the server it could not read."""


class McpServers:
    """One session's MCP servers; see the module docstring."""

    def __init__(
        self,
        spawn: Spawn,
        *,
        start_timeout_s: float = 15.0,
        call_timeout_s: float = 120.0,
        stop_timeout_s: float = 8.0,
    ) -> None:
        self._spawn = spawn
        self.limits: McpLimits = DEFAULT_LIMITS
        """Bounds on each server's tool list; set before `start` to change them."""
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._servers: list[_Server] = []
        self._tools: tuple[Tool, ...] = ()

    async def start(self, configs: Sequence[McpServerConfig]) -> tuple[McpProblem, ...]:
        """Start every server; returns the problems of those that did not come up."""
        fresh = [_Server(config) for config in configs]
        problems: list[McpProblem] = []
        seen = {server.config.name for server in self._servers}
        for server in fresh:
            if server.config.name in seen:
                problems.append(
                    McpProblem(
                        server=server.config.name,
                        code="mcp_duplicate_name",
                        message=f"two MCP servers are named {server.config.name!r}; rename one",
                    )
                )
                if server.config.held is not None:  # made for it, never to be used
                    self._spawn(server.config.held.close)
                continue
            seen.add(server.config.name)
            self._servers.append(server)
            self._spawn(functools.partial(self._serve, server))
        # _serve bounds its own start; this outer bound is a backstop.
        with anyio.move_on_after(self.start_timeout_s + 5):
            for server in fresh:
                if server in self._servers:
                    await server.settled.wait()
        for server in fresh:
            if server not in self._servers:
                continue
            if server.problem is None and server.client is None:
                server.problem = _timeout_problem(server.config.name, self.start_timeout_s)
                server.stop.set()
            if server.problem is not None:
                problems.append(server.problem)
            elif server.capped is not None:
                problems.append(
                    McpProblem(
                        server=server.config.name, code="mcp_tools_capped", message=server.capped
                    )
                )
        self._tools = tuple(
            self._tool(server, tool)
            for server in self._servers
            if server.client is not None
            for tool in server.tools
        )
        return tuple(problems)

    def tools(self) -> tuple[Tool, ...]:
        """The tools of every server that started."""
        return self._tools

    async def aclose(self) -> None:
        """Stop every server and wait (bounded) until their processes are gone."""
        for server in self._servers:
            server.stop.set()
        with anyio.move_on_after(self.stop_timeout_s), anyio.CancelScope(shield=True):
            for server in self._servers:
                await server.done.wait()
        self._servers.clear()
        self._tools = ()

    # -- one server's life ---------------------------------------------------------------------

    async def _serve(self, server: _Server) -> None:
        held = server.config.held
        watch = await watch_group(None, held.cgroup, held.tag) if held is not None else None
        try:
            with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
                await self._run(server, cast(TextIO, errlog))
        finally:
            server.client = None
            if held is not None and watch is not None:  # what it left behind (setsid, ...)
                await held.close()
                await watch.release()
            server.settled.set()
            server.done.set()

    async def _run(self, server: _Server, errlog: TextIO) -> None:
        name = server.config.name
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout_s) as scope:
                async with Client(
                    _transport(server.config, errlog),
                    mode="legacy",
                    message_handler=functools.partial(_on_message, server),
                ) as client:
                    listed, server.capped = cap_tools(name, await _list_all(client), self.limits)
                    server.client, server.tools, started = client, listed, True
                    scope.deadline = math.inf
                    server.settled.set()
                    await server.stop.wait()
            if scope.cancelled_caught and not started:
                server.problem = _timeout_problem(name, self.start_timeout_s, _tail(errlog))
        except Exception as error:  # the SDK raises many kinds; each is a failed server
            log.warning("MCP server %r stopped: %s", name, _describe(error), exc_info=True)
            if not started:
                server.problem = McpProblem(
                    server=name,
                    code="mcp_start_failed",
                    message=f"MCP server {name!r} failed to start: {_describe(error)}"
                    f"{_stderr_note(_tail(errlog))}; its tools are unavailable — check"
                    f" {server.config.describe()}",
                )

    def _tool(self, server: _Server, tool: mcp_types.Tool) -> Tool:
        hints = tool.annotations
        kind: ToolKind = "other"
        if hints is not None and hints.read_only_hint:
            kind = "fetch" if hints.open_world_hint else "read"
        # A server's strings reach the model request and the log: repair lone surrogates.
        label = scrub_text(tool.title or (hints.title if hints is not None else None) or tool.name)
        server_name = server.config.name
        schema: dict[str, Any] = scrub(dict(tool.input_schema or {"type": "object"}))
        schema.setdefault("type", "object")
        local = server.config.transport == "stdio"
        confined = _confined_as(server.config.sandbox) if local else None

        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            client = server.client
            if client is None:
                raise ToolFailure(
                    "mcp_server_gone",
                    f"the MCP server {server_name!r} is no longer running; its tools are"
                    " unavailable until the session is opened again",
                )
            try:
                with anyio.fail_after(self.call_timeout_s), anyio.CancelScope() as waiting:
                    server.calls.add(waiting)
                    try:
                        result = await client.call_tool(tool.name, args)
                    finally:
                        server.calls.discard(waiting)
            except TimeoutError:
                raise ToolFailure(
                    "mcp_timeout",
                    f"{server_name}/{tool.name} did not answer within {self.call_timeout_s:g}s",
                ) from None
            except Exception as error:
                log.warning("MCP call %s/%s failed", server_name, tool.name, exc_info=True)
                raise ToolFailure(
                    "mcp_call_failed", f"{server_name}/{tool.name} failed: {_describe(error)}"
                ) from error
            if waiting.cancelled_caught:
                raise ToolFailure(
                    "mcp_unreadable_answer",
                    f"{server_name}/{tool.name}: the server sent a message this client cannot"
                    f" read ({server.unreadable}), so the call's answer was lost — often a lone"
                    " UTF-16 surrogate escaped into its JSON; fix the server",
                )
            return _result(result)

        return Tool(
            name=mcp_tool_name(server_name, tool.name),
            description=scrub_text(
                tool.description or f"{tool.name} from the MCP server {server_name}"
            ),
            parameters=schema,
            kind=kind,
            handler=handler,
            timeout_s=self.call_timeout_s + 5,
            title=lambda args: f"{label} ({server_name})",
            exposure="auto",  # behind tool_search once the offered schemas pass the budget
            sandbox=confined,
        )


def _confined_as(sandbox: Sandbox) -> Callable[[Any], Awaitable[Sandbox]]:
    """The `Tool.sandbox` of a stdio server's tools: the server's own confinement."""

    async def confined(_environment: Any) -> Sandbox:
        return sandbox

    return confined


def _transport(config: McpServerConfig, errlog: TextIO) -> Any:
    """The SDK client transport (an async context manager) that reaches `config`'s server."""
    headers = dict(config.headers)
    if config.transport == "http":
        return _streamable_http(config.url, headers)
    if config.transport == "sse":
        return sse_client(config.url, headers=headers or None)
    params = StdioServerParameters(
        command=config.command,
        args=list(config.args),
        env=dict(config.env) or None,
        cwd=config.cwd,
    )
    return stdio_client(params, errlog=errlog)


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport over an HTTP client that carries `headers`
    (the SDK leaves a client it is given open, so this closes it)."""
    async with (
        create_mcp_http_client(headers=headers or None) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _list_all(client: Client) -> tuple[mcp_types.Tool, ...]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _result(result: mcp_types.CallToolResult) -> ToolResult:
    content: list[ToolContent] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            content.append(TextPart(text=block.text))
        elif isinstance(block, mcp_types.ImageContent):
            content.append(ImagePart(data=block.data, mime_type=block.mime_type))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = resource.text if isinstance(resource, mcp_types.TextResourceContents) else None
            content.append(
                ResourcePart(uri=str(resource.uri), text=text, mime_type=resource.mime_type)
            )
        elif isinstance(block, mcp_types.ResourceLink):
            content.append(
                ResourcePart(uri=str(block.uri), name=block.name, mime_type=block.mime_type)
            )
        else:
            content.append(TextPart(text=f"[{block.type} content is not shown]"))
    structured: JsonValue = result.structured_content
    raw = canonical_json(scrub(structured)) if structured is not None else None
    error = None
    if result.is_error:
        text = " ".join(p.text for p in content if isinstance(p, TextPart)) or "no detail"
        error = ToolError(code="mcp_tool_error", message=f"the MCP tool reported an error: {text}")
    return ToolResult(content=tuple(content), raw_output_json=raw, error=error)


async def _on_message(server: _Server, message: object) -> None:
    """The SDK's message handler: a message from the server it could not parse (invalid
    JSON, such as a lone surrogate escape, which its parser refuses) is dropped by the SDK,
    so the calls waiting on that server are ended now instead of at their timeout."""
    if isinstance(message, Exception):
        server.unreadable = " ".join(_describe(message).split())[:200]
        log.warning("MCP server %r sent an unreadable message: %s", server.config.name, message)
        for waiting in tuple(server.calls):
            waiting.cancel()
    await anyio.lowlevel.checkpoint()


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _describe(error.exceptions[0])
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _tail(errlog: TextIO, size: int = 400) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()
    except (OSError, ValueError):
        return ""
    return " ".join(text.split())[-size:]


def _stderr_note(tail: str) -> str:
    return f" (stderr: {tail})" if tail else ""


def _timeout_problem(name: str, seconds: float, tail: str = "") -> McpProblem:
    return McpProblem(
        server=name,
        code="mcp_start_timeout",
        message=f"MCP server {name!r} did not answer within {seconds:g}s{_stderr_note(tail)};"
        " it was stopped and its tools are unavailable — check that it speaks MCP at the"
        " address given (stdio command, or http / sse URL)",
    )


@asynccontextmanager
async def open_mcp_servers(
    configs: Sequence[McpServerConfig], **options: float
) -> AsyncIterator[tuple[McpServers, tuple[McpProblem, ...]]]:
    """Start `configs` under a task group of its own; everything is stopped on exit."""
    async with anyio.create_task_group() as tg:

        def spawn(job: Callable[[], Awaitable[None]]) -> None:
            async def run() -> None:
                await job()

            tg.start_soon(run)

        servers = McpServers(spawn, **options)
        try:
            problems = await servers.start(configs)
            yield servers, problems
        finally:
            await servers.aclose()
            tg.cancel_scope.cancel()
