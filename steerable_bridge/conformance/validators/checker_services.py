"""The client services `check acp` offers the agent under test: files and terminals, confined.

`check acp` advertises `fs.readTextFile`, `fs.writeTextFile` and `terminal` in `initialize`
so agents that delegate to their client take those paths, and `WorkspaceServices` serves
them for real inside the check's temporary workspace: `fs/read_text_file` (whole, or from
`line` for `limit` lines) and `fs/write_text_file` on absolute paths under the workspace
only (anything else, or a relative path, is refused with invalid params and a remedy);
`terminal/create` runs the command (with `args` as given; a lone command line without args
is run by `/bin/sh -c`, as editors do) with the workspace as the default cwd, keeps the last
`outputByteLimit` bytes of its output (default 1 MiB), and answers `terminal/output`,
`wait_for_exit` (bounded by the check's prompt deadline), `kill` and `release` (which kills
a running command). Unknown or released terminal ids are refused. Every process and reader
task belongs to the services' task group: leaving the context kills what is left. Grading
what the agent asked is the transcript rules' job (`acp_client_flow_rules.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from acp import RequestError
from acp.schema import (
    ClientCapabilities,
    CreateTerminalResponse,
    EnvVariable,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

__all__ = ["CHECKER_CAPABILITIES", "WorkspaceServices"]

CHECKER_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)
"""What `check acp` offers: it serves every one of these (`WorkspaceServices`)."""
DEFAULT_OUTPUT_LIMIT = 1024 * 1024
MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class _Terminal:
    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    finished: anyio.Event = field(default_factory=anyio.Event)

    def add(self, data: bytes) -> None:
        self.output += data
        if len(self.output) > self.limit:
            del self.output[: len(self.output) - self.limit]
            self.truncated = True

    def text(self) -> str:
        data = bytes(self.output)
        for skip in range(min(4, len(data)) + 1):  # do not start inside a UTF-8 sequence
            try:
                return data[skip:].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return data.decode("utf-8", errors="replace")

    def status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None or not self.finished.is_set():
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)


class WorkspaceServices:
    """Files and terminals under `workspace`, for the checker's client half."""

    def __init__(self, workspace: str, wait_timeout: float) -> None:
        self.workspace = Path(workspace).resolve()
        self.wait_timeout = wait_timeout
        self._terminals: dict[str, _Terminal] = {}
        self._started: list[_Terminal] = []
        self._ids = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WorkspaceServices]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    for terminal in self._started:
                        _kill(terminal.process)
                    for terminal in self._started:  # let each pump reap its process
                        await terminal.finished.wait()
                self._terminals.clear()
                tg.cancel_scope.cancel()

    # -- files ----------------------------------------------------------------------------

    def _inside(self, path: str) -> Path:
        if not os.path.isabs(path):
            raise RequestError.invalid_params(
                {"path": path, "reason": "not absolute; ACP file paths must be absolute"}
            )
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(self.workspace):
            raise RequestError.invalid_params(
                {
                    "path": path,
                    "reason": f"outside the check's workspace {self.workspace}; use paths in"
                    " the session's cwd",
                }
            )
        return resolved

    async def read_text_file(
        self, path: str, line: int | None = None, limit: int | None = None
    ) -> ReadTextFileResponse:
        target = self._inside(path)
        try:
            if target.stat().st_size > MAX_FILE_BYTES:
                raise RequestError.invalid_params({"path": path, "reason": "file over 16 MiB"})
            text = target.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        except OSError as err:
            raise RequestError.internal_error({"path": path, "reason": str(err)}) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            first = max((line or 1) - 1, 0)
            text = "".join(lines[first : None if limit is None else first + limit])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, path: str, content: str) -> WriteTextFileResponse:
        target = self._inside(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except OSError as err:
            raise RequestError.internal_error({"path": path, "reason": str(err)}) from None
        return WriteTextFileResponse()

    # -- terminals ------------------------------------------------------------------------

    async def create_terminal(
        self,
        command: str,
        args: list[str] | None,
        env: list[EnvVariable] | None,
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> CreateTerminalResponse:
        if self._tg is None:
            raise RequestError.internal_error({"reason": "the checker is shutting down"})
        where = self._inside(cwd) if cwd else self.workspace
        argv = [command, *args] if args else ["/bin/sh", "-c", command]
        extra = {v.name: v.value for v in env or []}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=where,
                env={**os.environ, **extra},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as err:
            raise RequestError.invalid_params({"command": command, "reason": str(err)}) from None
        terminal = _Terminal(process, output_byte_limit or DEFAULT_OUTPUT_LIMIT)
        terminal_id = f"check-term-{next(self._ids)}"
        self._terminals[terminal_id] = terminal
        self._started.append(terminal)
        self._tg.start_soon(_pump, terminal)
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> _Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise RequestError.invalid_params(
                {
                    "terminalId": terminal_id,
                    "reason": "no such terminal (never created, or already released)",
                }
            )
        return terminal

    async def terminal_output(self, terminal_id: str) -> TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        return TerminalOutputResponse(
            output=terminal.text(), truncated=terminal.truncated, exit_status=terminal.status()
        )

    async def wait_for_terminal_exit(self, terminal_id: str) -> WaitForTerminalExitResponse:
        terminal = self._terminal(terminal_id)
        with anyio.move_on_after(self.wait_timeout):
            await terminal.finished.wait()
        status = terminal.status()
        if status is None:
            raise RequestError.internal_error(
                {"terminalId": terminal_id, "reason": "still running at the check's deadline"}
            )
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, terminal_id: str) -> KillTerminalResponse:
        _kill(self._terminal(terminal_id).process)
        return KillTerminalResponse()

    async def release_terminal(self, terminal_id: str) -> ReleaseTerminalResponse:
        terminal = self._terminal(terminal_id)
        _kill(terminal.process)
        del self._terminals[terminal_id]
        return ReleaseTerminalResponse()


async def _pump(terminal: _Terminal) -> None:
    stdout = terminal.process.stdout
    try:
        if stdout is not None:
            while chunk := await stdout.read(65536):
                terminal.add(chunk)
        await terminal.process.wait()
    finally:
        terminal.finished.set()


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
