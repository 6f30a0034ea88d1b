"""`run`'s approval prompt: show what a tool call will do and ask the person at the terminal.

`TerminalAsker.open(cwd)` opens the controlling terminal (`/dev/tty`), or returns None when
the process has none (then `run` refuses and says so, as `--approve ask` promises). The
question and its preview — a unified diff for `write_file` / `edit_file`, the command line
for `run_command` — are written to the terminal, and the answer is read from it alone, never
from stdin: a pipe into `run` cannot answer, and keys typed before the question appeared are
discarded first, so typed-ahead shell commands never approve anything. The read waits on the
event loop (no thread), so cancelling the turn (Ctrl-C) withdraws the question at once and
leaves whatever is typed next to the shell. It must never block the event loop on the tty.
"""

from __future__ import annotations

import difflib
import json
import os
import termios
from typing import Any

import anyio

from steerable_bridge.commands.terminal import printable
from steerable_bridge.runtime.events import PermissionOutcome
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest

__all__ = ["PREVIEW_LINES", "TerminalAsker", "preview", "question"]

PREVIEW_LINES = 40
"""At most this many lines of diff or command are shown before the question."""

_READ_LIMIT = 1_000_000
"""Files larger than this are not read for a preview (the question says so)."""

_ANSWERS: dict[str, PermissionOutcome] = {
    "y": "allow_once",
    "a": "allow_always",
    "N": "reject_always",
}


def question(request: PermissionRequest) -> tuple[str, dict[str, PermissionOutcome]]:
    """The question for `request` and the answers it takes: always / never only when the
    call has a shape to keep (`runtime/tool_calls/command_shape.py`: never for a command that could
    smuggle another), named as the option names it ("Always allow `git status` here")."""
    offered = {option.kind: option.name for option in request.options}
    title = printable(request.title, layout=False)
    if "allow_always" not in offered:
        return f"Allow {title}? [y]es / [n]o: ", {"y": "allow_once"}
    always = printable(offered["allow_always"], layout=False)
    return f"Allow {title}? [y]es / [a] {always} / [n]o / [N]ever: ", _ANSWERS


class TerminalAsker:
    """Asks on the controlling terminal; `close()` when the command is done."""

    def __init__(self, fd: int, cwd: str) -> None:
        self._fd = fd
        self._cwd = cwd

    @classmethod
    def open(cls, cwd: str) -> TerminalAsker | None:
        """The asker for this process's terminal, or None when it has none."""
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return None
        return cls(fd, cwd)

    def close(self) -> None:
        os.close(self._fd)

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        shown = await anyio.to_thread.run_sync(preview, request, self._cwd)
        text = "".join(f"  {line}\n" for line in shown)
        termios.tcflush(self._fd, termios.TCIFLUSH)  # keys typed before the question
        asked, answers = question(request)
        os.write(self._fd, (printable(text) + asked).encode(errors="replace"))
        await anyio.wait_readable(self._fd)
        reply = os.read(self._fd, 4096).decode(errors="replace")  # one line: canonical mode
        if not reply:  # Ctrl-D
            os.write(self._fd, b"\n")
        outcome = answers.get(reply.strip()[:1], "reject_once")
        return PermissionAnswer(outcome=outcome, option_id=outcome)


def preview(request: PermissionRequest, cwd: str) -> list[str]:
    """What the call will change, as lines: a diff, a command line, or nothing."""
    try:
        arguments: Any = json.loads(request.call.arguments_json or "{}")
    except ValueError:
        return []
    if not isinstance(arguments, dict):
        return []
    name = request.call.name
    if name == "run_command" and isinstance(arguments.get("command"), str):
        lines = [f"$ {line}" for line in arguments["command"].splitlines() or [""]]
        if isinstance(arguments.get("cwd"), str):
            lines.append(f"(in {arguments['cwd']})")
        return _bounded(lines)
    path = arguments.get("path")
    if not isinstance(path, str):
        return []
    if name == "write_file" and isinstance(arguments.get("content"), str):
        old = _read(os.path.join(cwd, path))
        return _diff(path, old, arguments["content"])
    old_text, new_text = arguments.get("old_text"), arguments.get("new_text")
    if name == "edit_file" and isinstance(old_text, str) and isinstance(new_text, str):
        before = _read(os.path.join(cwd, path))
        if before is None or not old_text or old_text not in before:
            return _diff(path, old_text, new_text)  # the file's text is unknown: show the pair
        count = -1 if arguments.get("replace_all") else 1
        return _diff(path, before, before.replace(old_text, new_text, count))
    return []


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > _READ_LIMIT:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _diff(path: str, old: str | None, new: str) -> list[str]:
    lines = difflib.unified_diff(
        (old or "").splitlines(),
        new.splitlines(),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile=f"b/{path}",
        lineterm="",
    )
    return _bounded(list(lines)) or ["(the file's text stays the same)"]


def _bounded(lines: list[str]) -> list[str]:
    if len(lines) <= PREVIEW_LINES:
        return lines
    hidden = len(lines) - PREVIEW_LINES
    return [*lines[:PREVIEW_LINES], f"... {hidden} more line{'s' if hidden != 1 else ''}"]
