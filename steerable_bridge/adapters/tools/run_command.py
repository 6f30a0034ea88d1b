"""`run_command`: the workspace tool that runs a shell command and reports its outcome.

The command runs through the session's `Environment`: in a terminal the client shows when
the environment can (`RunsInTerminal`, ACP `terminal`), else as a process of the agent's
(sandboxed as the environment says). The wait is bounded (`timeout_ms`, default 2 min, at
most 10 min) and the output is capped (the last `OUTPUT_LIMIT` characters are kept, with a
note). The result ends with `[exit code N]` or the timeout, carries the terminal for the
client to show, and fails with `command_timeout` or `command_failed` so the model knows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from steerable_bridge.adapters.tools.context import environment_of, failure, resolve
from steerable_bridge.runtime.ports.environment import CommandResult, WorkspaceError
from steerable_bridge.runtime.ports.tools import ToolContext, ToolResult
from steerable_bridge.runtime.values import (
    TerminalContent,
    TextPart,
    ToolContent,
    ToolError,
    canonical_json,
)

__all__ = ["DEFAULT_TIMEOUT_MS", "MAX_TIMEOUT_MS", "OUTPUT_LIMIT", "RunsInTerminal", "run_command"]

OUTPUT_LIMIT = 100_000
DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


@runtime_checkable
class RunsInTerminal(Protocol):
    """An environment that runs commands in a terminal the client shows (ACP `terminal`)."""

    async def run_in_terminal(
        self,
        command: str,
        *,
        cwd: str,
        timeout_s: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]],
    ) -> CommandResult:
        """Like `Environment.run`; `on_terminal(id)` is awaited once the terminal exists."""


async def run_command(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    env = environment_of(ctx)
    cwd = resolve(ctx, args.get("cwd") or ".")
    timeout_ms = min(int(args.get("timeout_ms") or DEFAULT_TIMEOUT_MS), MAX_TIMEOUT_MS)
    command: str = args["command"]
    terminal: list[str] = []

    async def on_terminal(terminal_id: str) -> None:
        terminal.append(terminal_id)
        await ctx.output((TerminalContent(terminal_id=terminal_id),))

    try:
        if isinstance(env, RunsInTerminal):
            result = await env.run_in_terminal(
                command,
                cwd=cwd,
                timeout_s=timeout_ms / 1000,
                output_limit=OUTPUT_LIMIT,
                on_terminal=on_terminal,
            )
        else:
            result = await env.run(
                command, cwd=cwd, timeout_s=timeout_ms / 1000, output_limit=OUTPUT_LIMIT
            )
    except WorkspaceError as err:
        raise failure(err) from err
    content: list[ToolContent] = []
    terminal_id = result.terminal_id or (terminal[0] if terminal else None)
    if terminal_id is not None:
        content.append(TerminalContent(terminal_id=terminal_id))
    output = result.output
    if output and not output.endswith("\n"):
        output += "\n"
    note = "[output truncated: only the last part is shown]\n" if result.truncated else ""
    if result.timed_out:
        status = f"timed out after {timeout_ms} ms; the command and its children were stopped"
    else:
        status = f"exit code {result.exit_code}"
    content.append(TextPart(text=f"{note}{output}[{status}]"))
    raw: dict[str, JsonValue] = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "terminal_id": terminal_id,
        "sandbox": result.sandbox,
    }
    error = None
    if result.timed_out:
        error = ToolError(
            code="command_timeout",
            message=f"{command!r} did not finish within {timeout_ms} ms and was stopped;"
            " raise timeout_ms or run something shorter",
        )
    elif result.exit_code != 0:
        error = ToolError(
            code="command_failed", message=f"{command!r} exited with code {result.exit_code}"
        )
    return ToolResult(content=tuple(content), raw_output_json=canonical_json(raw), error=error)
