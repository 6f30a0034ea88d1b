"""The environment port: how workspace tools reach files and processes.

The same `read_file` tool reads the editor's unsaved buffer over ACP `fs/read_text_file`
when the client offers it and the local disk otherwise; the tool never knows which. Paths
given to an environment are absolute and already confined by the caller. Every method is
bounded: `run` by its `timeout_s`, the others by the implementation's own I/O timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.values import Sandbox

__all__ = ["CommandResult", "Environment", "OutputSink", "WorkspaceError"]

OutputSink = Callable[[bytes], None]
"""Takes a command's output while it runs, chunk by chunk (must not block)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """The outcome of `run`: exit code (None when killed), output, and how it ended."""

    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    terminal_id: str | None = None
    """Set when the command ran in a client-side terminal (ACP `terminal/create`)."""
    sandbox: Sandbox = "none"
    """What confined it: `bwrap`, `none`, or `client` (the editor's terminal ran it)."""


class WorkspaceError(CodedError):
    """A workspace operation failed; `code` is stable and `message` names the remedy."""


class Environment(Protocol):
    """Files and processes of one session's workspace."""

    async def read_text(
        self, path: str, *, line: int | None = None, limit: int | None = None
    ) -> str:
        """Text of `path`, optionally from 1-based `line` for `limit` lines."""

    async def write_text(self, path: str, content: str) -> None:
        """Replace (or create) `path` with `content`."""

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        timeout_s: float,
        output_limit: int,
        on_output: OutputSink | None = None,
    ) -> CommandResult:
        """Run a shell command; kill its whole process group on timeout or cancellation.
        `on_output` gets the merged output as it arrives, where the environment sees it
        (a client's own terminal shows it itself)."""

    async def sandbox(self) -> Sandbox:
        """What `run` would put around a command now (asked before it starts)."""
