"""The workspace tools a coding agent needs: read, write, edit, list, glob, grep, run.

`workspace_tools(workspace)` returns them (plus the built-in `update_plan`) with names and
parameters that are part of the contract: `read_file(path, line?, limit?)` (kind read),
`write_file(path, content)` and `edit_file(path, old_text, new_text, replace_all?)` (edit),
`list_dir(path?)`, `glob(pattern, path?)`, `grep(pattern, path?, glob?)` (search) and
`run_command(command, cwd?, timeout_ms?)` (execute). Kinds decide permissions: the loop
asks before every edit and execute call. Each tool has a human title ("Read src/app.py")
and reports locations (absolute path, and the line for reads); edits return a
`DiffContent` with the whole old and new text. Files and commands go through the session's
`Environment` (the editor over ACP, or the local disk), so the editor's unsaved buffer wins;
listing and searching use the local disk through `search.py`. Paths are confined to the
workspace the environment carries (`paths.py`, through `context.py`); `run_command` lives in
`run_command.py`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from pydantic import JsonValue

from steerable_bridge.adapters.tools import search
from steerable_bridge.adapters.tools.builtin import UPDATE_PLAN
from steerable_bridge.adapters.tools.context import environment_of, failure, resolve, workspace_of
from steerable_bridge.adapters.tools.file_names import shown as shown_name
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.reading import open_regular_path, read_window
from steerable_bridge.adapters.tools.run_command import MAX_TIMEOUT_MS, run_command
from steerable_bridge.adapters.tools.spill import spilled_path
from steerable_bridge.adapters.tools.stoppable import run_stoppable
from steerable_bridge.runtime.ports.environment import Environment, WorkspaceError
from steerable_bridge.runtime.ports.tools import (
    Tool,
    ToolContext,
    ToolFailure,
    ToolHandler,
    ToolResult,
)
from steerable_bridge.runtime.values import (
    DiffContent,
    Location,
    Sandbox,
    TextPart,
    canonical_json,
)

__all__ = ["workspace_tools"]

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
_SPILL_READ_BYTES = 4 * READ_MAX_CHARS  # UTF-8: enough bytes for what is shown


# -- read / write / edit -------------------------------------------------------------------


async def _read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    line: int | None = args.get("line")
    limit: int | None = args.get("limit")
    spilled = spilled_path(args["path"], ctx.session_id)
    if spilled is not None:  # a long tool output this session saved (`spill.py`)
        real = spilled
        try:
            text = await run_stoppable(lambda stop: _read_spill(spilled, line, limit, stop))
        except WorkspaceError as err:
            raise failure(err) from err
    else:
        env = environment_of(ctx)
        real = resolve(ctx, args["path"])
        try:
            text = await env.read_text(real, line=line, limit=limit)
        except WorkspaceError as err:
            raise failure(err) from err
    first = line or 1
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    size = 0
    for item in lines[:READ_MAX_LINES]:
        if size + len(item) > READ_MAX_CHARS:
            break
        kept.append(item)
        size += len(item)
    body = "".join(kept)
    if not lines and first > 1:
        body = f"[the file has fewer than {first} lines]"
    if lines and not kept:  # one enormous line (minified code): show its start
        kept = [lines[0]]
        body = lines[0][:READ_MAX_CHARS] + f"\n[line {first} is longer than {READ_MAX_CHARS}"
        body += f" characters; only the first {READ_MAX_CHARS} are shown]"
    if len(kept) < len(lines):
        shown_to = first + len(kept) - 1
        body += (
            f"\n[truncated: showed lines {first}-{shown_to}; call read_file with"
            f" line={shown_to + 1} to read on]"
        )
    raw: dict[str, JsonValue] = {
        "path": shown_name(real),
        "line": first,
        "lines": len(kept),
        "truncated": len(kept) < len(lines),
    }
    return ToolResult(content=(TextPart(text=body),), raw_output_json=canonical_json(raw))


def _read_spill(path: str, line: int | None, limit: int | None, stop: threading.Event) -> str:
    """Part of a spill file, bounded like every read (what is shown is smaller still)."""
    fd = open_regular_path(path)
    with os.fdopen(fd, "rb") as handle:
        window = read_window(
            handle,
            first=max(line or 1, 1),
            limit=limit,
            max_bytes=_SPILL_READ_BYTES,
            max_line_bytes=_SPILL_READ_BYTES,
            stop=stop,
        )
    return window.decode("utf-8", errors="replace")


async def _old_text(env: Environment, real: str) -> str | None:
    """The current text, or None for a file that does not exist (or cannot be read)."""
    if not await anyio.Path(real).exists():
        return None
    try:
        return await env.read_text(real)
    except WorkspaceError:
        return None


async def _write_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    env = environment_of(ctx)
    real = resolve(ctx, args["path"])
    content: str = args["content"]
    old = await _old_text(env, real)
    try:
        await env.write_text(real, content)
    except WorkspaceError as err:
        raise failure(err) from err
    verb = "Created" if old is None else "Wrote"
    shown = workspace_of(ctx).display(real)
    return ToolResult(
        content=(
            DiffContent(path=shown_name(real), old_text=old, new_text=content),
            TextPart(text=f"{verb} {shown} ({len(content.encode('utf-8'))} bytes)."),
        ),
        raw_output_json=canonical_json({"path": shown_name(real), "created": old is None}),
    )


async def _edit_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    env = environment_of(ctx)
    real = resolve(ctx, args["path"])
    old_text: str = args["old_text"]
    new_text: str = args["new_text"]
    replace_all = bool(args.get("replace_all", False))
    shown = workspace_of(ctx).display(real)
    if not old_text:
        raise ToolFailure(
            "empty_match", "old_text is empty; give the exact text to replace, or use write_file"
        )
    if old_text == new_text:
        raise ToolFailure("no_change", "old_text and new_text are the same; nothing to edit")
    try:
        before = await env.read_text(real)
    except WorkspaceError as err:
        raise failure(err) from err
    count = before.count(old_text)
    if count == 0:
        raise ToolFailure(
            "no_match",
            f"old_text was not found in {shown}; read the file again and copy the text exactly,"
            " including whitespace and indentation",
        )
    if count > 1 and not replace_all:
        raise ToolFailure(
            "ambiguous_match",
            f"old_text occurs {count} times in {shown}; include more surrounding lines so it"
            " matches once, or set replace_all to replace every occurrence",
        )
    after = (
        before.replace(old_text, new_text) if replace_all else before.replace(old_text, new_text, 1)
    )
    try:
        await env.write_text(real, after)
    except WorkspaceError as err:
        raise failure(err) from err
    line = before[: before.index(old_text)].count("\n") + 1
    plural = "s" if count > 1 else ""
    return ToolResult(
        content=(
            DiffContent(path=shown_name(real), old_text=before, new_text=after),
            TextPart(
                text=f"Edited {shown}: replaced {count} occurrence{plural} (first at line {line})."
            ),
        ),
        raw_output_json=canonical_json(
            {"path": shown_name(real), "replacements": count, "line": line}
        ),
    )


# -- list / glob / grep ----------------------------------------------------------------------


def _found(found: search.Found, empty: str) -> ToolResult:
    text = found.text or empty
    if found.truncated:
        text += "\n[truncated: narrow the path or the pattern to see the rest]"
    raw: dict[str, JsonValue] = {"count": len(found.lines), "truncated": found.truncated}
    return ToolResult(content=(TextPart(text=text),), raw_output_json=canonical_json(raw))


async def _list_dir(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        found = await search.list_dir(workspace_of(ctx), args.get("path") or ".")
    except WorkspaceError as err:
        raise failure(err) from err
    return _found(found, "(empty directory)")


async def _glob(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        found = await search.glob_files(workspace_of(ctx), args["pattern"], args.get("path") or ".")
    except WorkspaceError as err:
        raise failure(err) from err
    return _found(found, "(no files match)")


async def _grep(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        found = await search.grep(
            workspace_of(ctx), args["pattern"], args.get("path") or ".", args.get("glob")
        )
    except WorkspaceError as err:
        raise failure(err) from err
    return _found(found, "(no matches)")


# -- the tool set -----------------------------------------------------------------------------


def _describer(
    workspace: Workspace | None,
) -> tuple[Callable[[str], str], Callable[[str, int | None], tuple[Location, ...]]]:
    def shown(path: str) -> str:
        if workspace is None:
            return path
        try:
            return workspace.display(workspace.resolve(path))
        except WorkspaceError:
            return path

    def where(path: str, line: int | None = None) -> tuple[Location, ...]:
        if workspace is None:
            return (Location(path=path, line=line),) if os.path.isabs(path) else ()
        try:
            return (Location(path=workspace.resolve(path), line=line),)
        except WorkspaceError:
            return ()

    return shown, where


def _short(text: str, size: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 3] + "..."


def _bind(handler: ToolHandler, environment: Environment | None) -> ToolHandler:
    """Use `environment` when the session has none of its own (AG-UI `--workspace`)."""
    if environment is None:
        return handler

    async def bound(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.environment is None:
            ctx = dataclasses.replace(ctx, environment=environment)
        return await handler(args, ctx)

    return bound


def _sandbox_of(bound: Environment | None) -> Callable[[Environment | None], Awaitable[Sandbox]]:
    """What confines `run_command`: asked of the session's environment, else `bound`."""

    async def which(session: Environment | None) -> Sandbox:
        environment = session or bound
        return "none" if environment is None else await environment.sandbox()

    return which


def workspace_tools(
    workspace: Workspace | None = None, *, environment: Environment | None = None
) -> tuple[Tool, ...]:
    """The workspace tool set.

    `workspace` makes titles and locations exact (absolute paths); `environment` is used
    by sessions that have no environment of their own (a server with one fixed workspace).
    """
    shown, where = _describer(workspace)

    def path_of(args: Mapping[str, Any]) -> str:
        return str(args.get("path") or ".")

    path_param = {"type": "string", "description": "File path, relative to the project root"}
    return (
        Tool(
            name="read_file",
            description="Read a text file. Use line (1-based) and limit to read part of a"
            " large file.",
            parameters={
                "type": "object",
                "properties": {
                    "path": path_param,
                    "line": {"type": "integer", "minimum": 1, "description": "First line"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Line count"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            kind="read",
            handler=_bind(_read_file, environment),
            parallel_safe=True,
            timeout_s=60.0,
            title=lambda a: (
                f"Read {shown(path_of(a))}" + (f" (from line {a['line']})" if a.get("line") else "")
            ),
            locations=lambda a: where(path_of(a), a.get("line") or 1),
        ),
        Tool(
            name="write_file",
            description="Create a file or replace its whole content.",
            parameters={
                "type": "object",
                "properties": {"path": path_param, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            kind="edit",
            handler=_bind(_write_file, environment),
            timeout_s=60.0,
            title=lambda a: f"Write {shown(path_of(a))}",
            locations=lambda a: where(path_of(a), None),
        ),
        Tool(
            name="edit_file",
            description="Replace old_text with new_text in a file. old_text must match exactly"
            " once unless replace_all is true.",
            parameters={
                "type": "object",
                "properties": {
                    "path": path_param,
                    "old_text": {"type": "string", "description": "Exact text to replace"},
                    "new_text": {"type": "string", "description": "Replacement text"},
                    "replace_all": {"type": "boolean", "default": False},
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": False,
            },
            kind="edit",
            handler=_bind(_edit_file, environment),
            timeout_s=60.0,
            title=lambda a: f"Edit {shown(path_of(a))}",
            locations=lambda a: where(path_of(a), None),
        ),
        Tool(
            name="list_dir",
            description="List a directory (folders end in '/'). Defaults to the project root.",
            parameters={
                "type": "object",
                "properties": {"path": path_param},
                "additionalProperties": False,
            },
            kind="search",
            handler=_bind(_list_dir, environment),
            parallel_safe=True,
            timeout_s=30.0,
            title=lambda a: f"List {shown(path_of(a))}",
            locations=lambda a: where(path_of(a), None),
        ),
        Tool(
            name="glob",
            description="Find files by glob pattern, e.g. '**/*.py', under path (default root).",
            parameters={
                "type": "object",
                "properties": {"pattern": {"type": "string"}, "path": path_param},
                "required": ["pattern"],
                "additionalProperties": False,
            },
            kind="search",
            handler=_bind(_glob, environment),
            parallel_safe=True,
            timeout_s=30.0,
            title=lambda a: (
                f"Find {a['pattern']}" + (f" in {shown(str(a['path']))}" if a.get("path") else "")
            ),
        ),
        Tool(
            name="grep",
            description="Search file contents with a regular expression; optional glob filters"
            " file names. Prints path:line:text.",
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression"},
                    "path": path_param,
                    "glob": {"type": "string", "description": "Only files matching, e.g. *.py"},
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            kind="search",
            handler=_bind(_grep, environment),
            parallel_safe=True,
            timeout_s=30.0,
            title=lambda a: (
                f"Search {_short(str(a['pattern']), 40)!r}"
                + (f" in {shown(str(a['path']))}" if a.get("path") else "")
            ),
        ),
        Tool(
            name="run_command",
            description="Run a shell command in the project (or in cwd). Output is merged and"
            " limited; the command is stopped after timeout_ms (default 120000).",
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "cwd": {"type": "string", "description": "Folder to run in"},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            kind="execute",
            handler=_bind(run_command, environment),
            sandbox=_sandbox_of(environment),
            timeout_s=MAX_TIMEOUT_MS / 1000 + 30,
            title=lambda a: f"Run {_short(str(a['command']))}",
            locations=lambda a: where(str(a["cwd"]), None) if a.get("cwd") else (),
        ),
        UPDATE_PLAN,
    )
