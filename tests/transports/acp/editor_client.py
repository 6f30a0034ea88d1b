"""A test ACP client that implements the editor's side of fs and terminals for real.

`EditorClient` serves `fs/read_text_file` from in-memory buffers (the editor's unsaved
text), records `fs/write_text_file`, and runs `terminal/create` commands as real
subprocesses in their own process group, answering `wait_for_exit`, `output`, `kill` and
`release`. Every client method call is appended to `calls`, in order. `connected()` pairs
it in-process with an agent-side connection over a socket pair (the SDK's own framing).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from acp import schema as acp
from acp.agent.connection import AgentSideConnection
from acp.client.connection import ClientSideConnection


@dataclass
class Terminal:
    process: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    pump: asyncio.Task[None] | None = None


class EditorClient:
    def __init__(self, buffers: dict[str, str] | None = None) -> None:
        self.buffers = dict(buffers or {})
        self.writes: list[tuple[str, str]] = []
        self.calls: list[str] = []
        self.updates: list[Any] = []
        self.terminals: dict[str, Terminal] = {}
        self.pgids: list[int] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kw: Any
    ) -> Any:
        self.calls.append("session/request_permission")
        return acp.RequestPermissionResponse(
            outcome=acp.AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def read_text_file(
        self,
        path: str,
        session_id: str,
        line: int | None = None,
        limit: int | None = None,
        **kw: Any,
    ) -> acp.ReadTextFileResponse:
        self.calls.append("fs/read_text_file")
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        lines = self.buffers[path].splitlines(keepends=True)
        start = (line or 1) - 1
        chosen = lines[start : start + limit] if limit is not None else lines[start:]
        return acp.ReadTextFileResponse(content="".join(chosen))

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kw: Any
    ) -> acp.WriteTextFileResponse:
        self.calls.append("fs/write_text_file")
        self.writes.append((path, content))
        self.buffers[path] = content
        return acp.WriteTextFileResponse()

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kw: Any,
    ) -> acp.CreateTerminalResponse:
        self.calls.append("terminal/create")
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal = Terminal(process=process, limit=output_byte_limit)
        terminal.pump = asyncio.get_running_loop().create_task(self._pump(terminal))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        self.pgids.append(process.pid)
        return acp.CreateTerminalResponse(terminal_id=terminal_id)

    async def _pump(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(4096):
            terminal.output.extend(chunk)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> acp.WaitForTerminalExitResponse:
        self.calls.append("terminal/wait_for_exit")
        code = await self.terminals[terminal_id].process.wait()
        return acp.WaitForTerminalExitResponse(exit_code=code if code >= 0 else None)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> acp.TerminalOutputResponse:
        self.calls.append("terminal/output")
        terminal = self.terminals[terminal_id]
        if terminal.pump is not None and terminal.process.returncode is not None:
            await asyncio.wait_for(terminal.pump, 2)
        data = bytes(terminal.output)
        truncated = terminal.limit is not None and len(data) > terminal.limit
        if truncated and terminal.limit is not None:
            data = data[-terminal.limit :]
        code = terminal.process.returncode
        status = acp.TerminalExitStatus(exit_code=code) if code is not None and code >= 0 else None
        return acp.TerminalOutputResponse(
            output=data.decode(errors="replace"), truncated=truncated, exit_status=status
        )

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> acp.KillTerminalResponse:
        self.calls.append("terminal/kill")
        process = self.terminals[terminal_id].process
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await asyncio.wait_for(process.wait(), 5)
        return acp.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> acp.ReleaseTerminalResponse:
        self.calls.append("terminal/release")
        terminal = self.terminals.pop(terminal_id)
        if terminal.process.returncode is None:
            os.killpg(terminal.process.pid, signal.SIGKILL)
            await asyncio.wait_for(terminal.process.wait(), 5)
        if terminal.pump is not None:
            terminal.pump.cancel()
        return acp.ReleaseTerminalResponse()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)


class NoAgent:
    """An agent that answers nothing: these tests only use the agent → client direction."""


@asynccontextmanager
async def connected(
    client: EditorClient, agent: Any = None
) -> AsyncIterator[tuple[AgentSideConnection, ClientSideConnection]]:
    """An agent-side and a client-side SDK connection joined by a socket pair."""
    agent_sock, client_sock = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_sock)
    client_reader, client_writer = await asyncio.open_connection(sock=client_sock)
    agent_conn = AgentSideConnection(
        agent if agent is not None else NoAgent(),
        agent_writer,
        agent_reader,
        use_unstable_protocol=True,
    )
    client_conn = ClientSideConnection(
        client, client_writer, client_reader, use_unstable_protocol=True
    )
    try:
        yield agent_conn, client_conn
    finally:
        await client_conn.close()
        await agent_conn.close()
        for writer in (agent_writer, client_writer):
            writer.close()
