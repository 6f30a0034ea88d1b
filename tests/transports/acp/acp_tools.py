"""Tools the ACP end-to-end tests load with `--tools-module`.

`write_note` (kind edit) writes a file under the session's cwd and returns the diff;
`slow_step` (kind execute) reports progress, then waits `seconds` (cancellable) before
answering. Both need permission in the `default` mode, which is what the tests exercise.
`noisy` (kind think) prints to stdout and runs a child that does too — the agent must keep
both out of the JSON-RPC stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import DiffContent, Location, TextPart, canonical_json


async def _write_note(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    path = Path(ctx.cwd) / str(args["path"])
    old = path.read_text() if path.exists() else None
    path.write_text(str(args["text"]))
    return ToolResult(
        content=(DiffContent(path=str(path), old_text=old, new_text=str(args["text"])),),
        raw_output_json=canonical_json({"written": str(path), "bytes": len(str(args["text"]))}),
    )


async def _slow_step(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    await ctx.output((TextPart(text="started"),))
    await anyio.sleep(float(args["seconds"]))
    return ToolResult(content=(TextPart(text="done"),))


async def _noisy(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    print("stray print from a tool")
    await anyio.run_process(["echo", "stray output from a child process"], stdout=None)
    return ToolResult(content=(TextPart(text="made some noise"),))


def _note_title(args: Mapping[str, Any]) -> str:
    return f"Write {args['path']}"


def _note_locations(args: Mapping[str, Any]) -> tuple[Location, ...]:
    return (Location(path=str(args["path"]), line=1),)


TOOLS = [
    Tool(
        name="write_note",
        description="Write a text file under the working directory",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"],
        },
        kind="edit",
        handler=_write_note,
        title=_note_title,
        locations=_note_locations,
    ),
    Tool(
        name="slow_step",
        description="Wait a while, reporting progress",
        parameters={
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
        kind="execute",
        handler=_slow_step,
        title=lambda args: f"Wait {args['seconds']}s",
    ),
    Tool(name="noisy", description="Print to stdout", kind="think", handler=_noisy),
]
