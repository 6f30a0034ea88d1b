"""Durable approvals: "always" answers a project remembers across sessions and processes.

A session remembers "always allow / reject" answers in its own log (`SessionFacts.always`,
keyed like the project's). `ApprovalMemory` is the port for the longer memory: per
project (the session's workspace root, its `cwd`), per `approval_key` — the tool name, and
for a tool that runs a shell command, the command's shape (`run_command:git status`,
`command_shape.py`): "always allow `git status`" allows neither `rm` nor `git -c ...`. A
command with no shape (chaining, wrappers, interpreters, options that run code, programs
nobody reviewed) has no key: it is asked about every time and the "always" options are
not offered for it (`approval_options`). The loop asks `recall` before the permission
policy (a session's own answer wins), and calls `remember` when the user picks an
"always" option. Implementations do their own I/O and must bound it; the runtime only
holds the port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from steerable_bridge.runtime.ports.permissions import DEFAULT_OPTIONS
from steerable_bridge.runtime.tool_calls.command_shape import command_shape
from steerable_bridge.runtime.values import PermissionOption

__all__ = ["ApprovalMemory", "approval_key", "approval_options"]


def approval_key(tool_name: str, args: Mapping[str, Any]) -> str | None:
    """What an "always" answer about this call covers, or None when it may not be kept."""
    command = args.get("command")
    if not isinstance(command, str):
        return tool_name
    shape = command_shape(command).shape
    return None if shape is None else f"{tool_name}:{shape}"


_ONCE_ONLY = tuple(o for o in DEFAULT_OPTIONS if o.kind not in ("allow_always", "reject_always"))


def approval_options(tool_name: str, key: str | None) -> tuple[PermissionOption, ...]:
    """The options offered for a call with `key`: no "always" ones without a key, and the
    "always" ones naming what they cover for a command ("Always allow `git diff` here")."""
    if key is None:
        return _ONCE_ONLY
    if not key.startswith(tool_name + ":"):
        return DEFAULT_OPTIONS
    shape = key[len(tool_name) + 1 :]
    named = {
        "allow_always": f"Always allow `{shape}` here",
        "reject_always": f"Always reject `{shape}` here",
    }
    return tuple(
        PermissionOption(option_id=o.option_id, name=named[o.kind], kind=o.kind)
        if o.kind in named
        else o
        for o in DEFAULT_OPTIONS
    )


class ApprovalMemory(Protocol):
    """Remembered answers per project root and `approval_key`."""

    async def recall(self, root: str, key: str) -> bool | None:
        """True = always allowed, False = always rejected, None = ask."""

    async def remember(self, root: str, key: str, allow: bool) -> None:
        """Keep the user's "always" answer for this project."""
