"""Durable approvals: "always" answers a project remembers across sessions and processes.

A session remembers "always allow / reject TOOL" in its own log (`SessionFacts.always`).
`ApprovalMemory` is the port for the longer memory: per project (the session's workspace
root, its `cwd`), per `approval_key` — the tool name, and for a tool that runs a shell
command, the command's program (`run_command:git`): "always allow `pytest`" must not allow
`rm`. A command that chains or redirects (`;`, `&&`, `|`, `>`, backticks, `$(`) has no
key, so it is always asked about. The loop asks `recall` before the permission policy (a
session's own answer wins), and calls `remember` when the user picks an "always" option.
Implementations do their own I/O and must bound it; the runtime only holds the port.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["ApprovalMemory", "approval_key"]

_CHAINING = (";", "&", "|", ">", "<", "`", "$(", "\n")


def approval_key(tool_name: str, args: Mapping[str, Any]) -> str | None:
    """What an "always" answer about this call covers, or None when it may not be kept."""
    command = args.get("command")
    if not isinstance(command, str):
        return tool_name
    if any(mark in command for mark in _CHAINING):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0]:
        return None  # empty, or `VAR=value program`: the program is not the first word
    return f"{tool_name}:{words[0]}"


class ApprovalMemory(Protocol):
    """Remembered answers per project root and `approval_key`."""

    async def recall(self, root: str, key: str) -> bool | None:
        """True = always allowed, False = always rejected, None = ask."""

    async def remember(self, root: str, key: str, allow: bool) -> None:
        """Keep the user's "always" answer for this project."""
