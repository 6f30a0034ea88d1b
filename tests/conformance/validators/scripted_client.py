"""A scripted ACP client (the SDK's client side) for driving the client validator in tests.

It implements what a real editor does — shows updates, answers permission requests, reads
and writes files on disk, runs terminals as subprocesses — with knobs to misbehave: answer
permission with an option it was not offered, ignore the stop request, ignore line / limit,
never answer requests it does not know, or advertise less.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp import RequestError
from acp.interfaces import Agent
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)


@dataclass
class _Terminal:
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None


class ScriptedClient:
    """An ACP client that behaves like a careful editor unless told otherwise."""

    def __init__(
        self,
        *,
        unoffered_option: str | None = None,
        press_stop: bool = True,
        ignore_line_limit: bool = False,
        hang_on_unknown: bool = False,
        raw_permission_answer: dict[str, Any] | None = None,
    ) -> None:
        self.unoffered_option = unoffered_option
        self.press_stop = press_stop
        self.ignore_line_limit = ignore_line_limit
        self.hang_on_unknown = hang_on_unknown
        self.raw_permission_answer = raw_permission_answer
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []
        self.terminals: dict[str, _Terminal] = {}
        self.agent: Agent | None = None

    def on_connect(self, conn: Agent) -> None:
        self.agent = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse | dict[str, Any]:
        self.permission_requests.append((tool_call, options))
        if self.raw_permission_answer is not None and "stop" not in (tool_call.title or "").lower():
            return self.raw_permission_answer  # sent as is: the SDK does not re-validate it
        if "stop" in (tool_call.title or "").lower():
            if not self.press_stop:
                await asyncio.sleep(3600)
            assert self.agent is not None
            await self.agent.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = self.unoffered_option or options[0].option_id
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        text = await anyio.Path(path).read_text(encoding="utf-8")
        if self.ignore_line_limit or (line is None and limit is None):
            return ReadTextFileResponse(content=text)
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = start + limit if limit is not None else None
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        await anyio.Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
        )
        terminal = _Terminal(process)

        async def pump() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(4096):
                terminal.output.extend(chunk)

        terminal.reader = asyncio.create_task(pump())
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> _Terminal:
        try:
            return self.terminals[terminal_id]
        except KeyError:
            raise RequestError.invalid_params({"terminalId": terminal_id}) from None

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        code = terminal.process.returncode
        status = TerminalExitStatus(exit_code=code) if code is not None and code >= 0 else None
        return TerminalOutputResponse(
            output=terminal.output.decode(errors="replace"), truncated=False, exit_status=status
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self._terminal(terminal_id)
        code = await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader
        if code < 0:
            return WaitForTerminalExitResponse(signal=f"signal {-code}")
        return WaitForTerminalExitResponse(exit_code=code)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        with contextlib.suppress(ProcessLookupError):
            self._terminal(terminal_id).process.kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        terminal = self.terminals.pop(terminal_id, None)
        if terminal is not None and terminal.process.returncode is None:
            terminal.process.kill()
            await terminal.process.wait()
        if terminal is not None and terminal.reader is not None:
            await terminal.reader
        return ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.hang_on_unknown:
            await asyncio.sleep(3600)
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def close(self) -> None:
        for terminal_id in list(self.terminals):
            await self.release_terminal("", terminal_id)
