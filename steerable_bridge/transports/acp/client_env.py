"""The editor as the environment: files and commands routed through the ACP client.

`ClientEnvironment` implements the runtime's `Environment` port for one ACP session. When
the client advertised `fs.readTextFile` / `fs.writeTextFile`, reads and writes go through
`fs/read_text_file` / `fs/write_text_file`, so the editor's unsaved buffers win; when it
advertised `terminal`, commands run in a client terminal: `terminal/create` →
`terminal/wait_for_exit` (bounded by the command's timeout) → `terminal/output` →
`terminal/release`, with `terminal/kill` on timeout or cancellation, and the terminal id is
reported as soon as it exists so the `tool_call_update` can embed it; such commands are
marked `sandbox: client` (their confinement is the editor's business). Whatever the client
did not advertise falls back to the local environment it wraps. Every request is bounded.

`AcpWorkspaces` is the ACP agent's per-session hook: the composition root hands it a
`KitFactory` (confinement, local environment, workspace tools, MCP servers — adapters the
transport never imports), and it mounts a session's kit on session/new, load, resume and
fork (while the agent port attaches the conversation), connects its `mcpServers` (stdio,
and `http` / `sse` ones, as `mcpCapabilities` advertises; others are refused), returns the
`Mount`: the client environment, the tools, and a message for the user about servers that
failed (which the agent shows once the session is open), and stops everything when the
session closes or the connection ends.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import anyio
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.ports.environment import (
    CommandResult,
    Environment,
    OutputSink,
    WorkspaceError,
)
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.values import Sandbox

if TYPE_CHECKING:
    from steerable_bridge.transports.acp.session import ClientLink

__all__ = [
    "AcpWorkspaces",
    "ClientEnvironment",
    "KitFactory",
    "McpServerSpec",
    "Mount",
    "SessionKit",
    "Spawn",
]

log = logging.getLogger("steerable_bridge.acp")

Spawn = Callable[[Callable[[], Awaitable[None]]], None]


class ClientEnvironment:
    """Reads, writes and commands through the ACP client where it offers them."""

    def __init__(
        self,
        conn: Any,
        session_id: str,
        capabilities: acp.ClientCapabilities | None,
        fallback: Environment,
        *,
        io_timeout_s: float = 30.0,
    ) -> None:
        self.conn = conn
        self.session_id = session_id
        self.fallback = fallback
        self.io_timeout_s = io_timeout_s
        fs = capabilities.fs if capabilities is not None else None
        self.reads = bool(fs is not None and fs.read_text_file)
        self.writes = bool(fs is not None and fs.write_text_file)
        self.terminal = bool(capabilities is not None and capabilities.terminal)

    @property
    def workspace(self) -> Any:
        """The confinement of the wrapped local environment (tools resolve paths with it)."""
        return getattr(self.fallback, "workspace", None)

    def _check(self, path: str) -> None:
        workspace = self.workspace
        if workspace is not None and not workspace.contains(path):
            raise WorkspaceError(
                "outside_workspace", f"{path} is outside the workspace; use a path in the project"
            )

    async def read_text(
        self, path: str, *, line: int | None = None, limit: int | None = None
    ) -> str:
        if not self.reads:
            return await self.fallback.read_text(path, line=line, limit=limit)
        self._check(path)
        response = await self._call(
            "read", path, self.conn.read_text_file, path=path, line=line, limit=limit
        )
        text: str = response.content
        return text

    async def write_text(self, path: str, content: str) -> None:
        if not self.writes:
            await self.fallback.write_text(path, content)
            return
        self._check(path)
        await self._call("write", path, self.conn.write_text_file, path=path, content=content)

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        timeout_s: float,
        output_limit: int,
        on_output: OutputSink | None = None,
    ) -> CommandResult:
        """In the editor's terminal, which shows the output itself (`on_output` is used
        only when the command falls back to the local environment)."""
        if not self.terminal:
            return await self.fallback.run(
                command, cwd=cwd, timeout_s=timeout_s, output_limit=output_limit,
                on_output=on_output,
            )  # fmt: skip
        return await self.run_in_terminal(
            command, cwd=cwd, timeout_s=timeout_s, output_limit=output_limit, on_terminal=None
        )

    async def run_in_terminal(
        self,
        command: str,
        *,
        cwd: str,
        timeout_s: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None,
    ) -> CommandResult:
        """`run` in a client terminal; `on_terminal(id)` is awaited once it exists."""
        if not self.terminal:
            return await self.fallback.run(
                command, cwd=cwd, timeout_s=timeout_s, output_limit=output_limit
            )
        self._check(cwd)
        created = await self._call(
            "start a terminal for",
            command,
            self.conn.create_terminal,
            command="/bin/sh",
            args=["-c", command],
            cwd=cwd,
            output_byte_limit=output_limit,
        )
        terminal_id: str = created.terminal_id
        ended = killed = False
        try:
            if on_terminal is not None:
                await on_terminal(terminal_id)
            with anyio.move_on_after(timeout_s):
                await self.conn.wait_for_terminal_exit(
                    session_id=self.session_id, terminal_id=terminal_id
                )
                ended = True
            if not ended:
                await self._kill(terminal_id)
                killed = True
            output = await self._call(
                "read the output of", command, self.conn.terminal_output, terminal_id=terminal_id
            )
        except RequestError as error:
            raise WorkspaceError(
                "client_terminal_failed", f"the editor's terminal failed for {command!r}: {error}"
            ) from error
        finally:
            with anyio.CancelScope(shield=True):
                if not ended and not killed:
                    await self._kill(terminal_id)
                await self._quietly(self.conn.release_terminal, terminal_id=terminal_id)
        status = output.exit_status
        return CommandResult(
            exit_code=status.exit_code if status is not None and ended else None,
            output=output.output,
            truncated=bool(output.truncated),
            timed_out=not ended,
            terminal_id=terminal_id,
            sandbox="client",
        )

    async def sandbox(self) -> Sandbox:
        """`client` when the editor's terminal runs commands, else the local sandbox."""
        return "client" if self.terminal else await self.fallback.sandbox()

    async def _kill(self, terminal_id: str) -> None:
        await self._quietly(self.conn.kill_terminal, terminal_id=terminal_id)

    async def _quietly(self, method: Callable[..., Awaitable[Any]], **params: Any) -> None:
        """Best-effort cleanup: bounded, and a client that refuses is only logged."""
        with anyio.move_on_after(self.io_timeout_s):
            try:
                await method(session_id=self.session_id, **params)
            except (RequestError, ConnectionError) as error:
                log.info("terminal cleanup %s failed: %s", method.__name__, error)

    async def _call(
        self, what: str, subject: str, method: Callable[..., Awaitable[Any]], **params: Any
    ) -> Any:
        try:
            with anyio.fail_after(self.io_timeout_s):
                return await method(session_id=self.session_id, **params)
        except TimeoutError:
            raise WorkspaceError(
                "client_timeout",
                f"the editor did not {what} {subject} within {self.io_timeout_s:g}s;"
                " check that it is responsive",
            ) from None
        except RequestError as error:
            raise WorkspaceError(
                "client_fs_error", f"the editor could not {what} {subject}: {_said(error)}"
            ) from error
        except ConnectionError as error:
            raise WorkspaceError(
                "client_gone", f"the editor connection closed while trying to {what} {subject}"
            ) from error


def _said(error: RequestError) -> str:
    """The editor's refusal in its own words: the message, and `data.details` (where
    editors put the reason, such as "Permission denied for fs/read_text_file") when given."""
    text = str(error) or f"error {error.code}"
    data = error.data
    details = data.get("details") if isinstance(data, dict) else data
    if isinstance(details, str) and details.strip() and details not in text:
        text = f"{text} ({details.strip()})"
    return text


# -- the per-session hook ------------------------------------------------------------------


class McpServerSpec(TypedDict, total=False):
    """One MCP server as ACP describes it, in plain values: `transport` "stdio" (with
    `command`, `args`, `env`; ACP `McpServerStdio`; `network` from its
    `_meta.steerable.network`, when a boolean), "http" or "sse" (with `url`, `headers`;
    `McpServerHttp` / `McpServerSse`)."""

    name: str
    transport: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    network: bool
    url: str
    headers: dict[str, str]


class SessionKit(Protocol):
    """One session's workspace, built by the composition root."""

    @property
    def environment(self) -> Environment:
        """The local environment (the client's fs / terminal are layered over it)."""

    def tools(self) -> tuple[Tool, ...]:
        """The workspace tools plus the tools of every MCP server that started."""

    async def start_mcp(self, servers: Sequence[McpServerSpec]) -> tuple[str, ...]:
        """Start MCP servers; returns a message for the user about each one that failed."""

    async def aclose(self) -> None:
        """Stop the MCP servers (bounded)."""


KitFactory = Callable[[str, tuple[str, ...], Spawn], SessionKit]
"""(cwd, additional directories, spawn) → the session's kit."""


def mcp_specs(servers: Sequence[Any]) -> tuple[list[McpServerSpec], list[str]]:
    """Split ACP `mcpServers` into specs this agent connects and messages about the rest."""
    specs: list[McpServerSpec] = []
    refused: list[str] = []
    for server in servers:
        if isinstance(server, acp.McpServerStdio):
            spec = McpServerSpec(
                name=server.name,
                transport="stdio",
                command=server.command,
                args=tuple(server.args),
                env={variable.name: variable.value for variable in server.env},
            )
            network = _steerable_meta(server.field_meta).get("network")
            if isinstance(network, bool):
                spec["network"] = network
            specs.append(spec)
        elif isinstance(server, acp.HttpMcpServer | acp.SseMcpServer):
            specs.append(
                McpServerSpec(
                    name=server.name,
                    transport=server.type,
                    url=server.url,
                    headers={header.name: header.value for header in server.headers},
                )
            )
        else:
            kind = getattr(server, "type", "unknown")
            name = getattr(server, "name", "?")
            refused.append(
                f"MCP server {name!r} uses the {kind} transport, which this agent does not"
                " support (stdio, http and sse are); its tools are unavailable"
            )
    return specs, refused


def _steerable_meta(meta: Any) -> dict[str, Any]:
    """`_meta.steerable` of an ACP object, or {} when absent or not an object."""
    inner = meta.get("steerable") if isinstance(meta, dict) else None
    return inner if isinstance(inner, dict) else {}


@dataclass(frozen=True, slots=True)
class Mount:
    """One session's mounted workspace: what the agent port attaches, and what to tell."""

    environment: ClientEnvironment
    tools: tuple[Tool, ...]
    warning: str | None
    """One message for the user about the MCP servers that failed (None: all started)."""


class AcpWorkspaces:
    """Mounts and unmounts each ACP session's workspace kit (see the module docstring)."""

    def __init__(self, factory: KitFactory) -> None:
        self.factory = factory
        self.kits: dict[str, SessionKit] = {}

    async def mount(
        self,
        session_id: str,
        cwd: str,
        link: ClientLink,
        *,
        spawn: Spawn,
        mcp_servers: Sequence[Any] | None,
        additional_directories: Sequence[str] | None,
    ) -> Mount:
        """The session's environment and tools, with its MCP servers started."""
        await self.unmount(session_id)
        kit = self.factory(cwd, tuple(additional_directories or ()), spawn)
        self.kits[session_id] = kit
        environment = ClientEnvironment(link.conn, session_id, link.capabilities, kit.environment)
        specs, problems = mcp_specs(mcp_servers or ())
        if specs:
            problems.extend(await kit.start_mcp(specs))
        for problem in problems:
            log.warning("session %s: %s", session_id, problem)
        warning = "\n".join(f"⚠ {problem}" for problem in problems) if problems else None
        return Mount(environment=environment, tools=kit.tools(), warning=warning)

    async def unmount(self, session_id: str) -> None:
        """Stop the session's MCP servers; safe to call twice."""
        kit = self.kits.pop(session_id, None)
        if kit is not None:
            with anyio.CancelScope(shield=True):
                await kit.aclose()

    async def aclose(self) -> None:
        """Stop every session's servers (the connection is ending)."""
        for session_id in list(self.kits):
            await self.unmount(session_id)
