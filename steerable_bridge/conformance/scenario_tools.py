"""The tools the scenario corpus uses, beyond the built-ins; loadable by `--tools-module`.

Every scenario runs with the same tool set on every path (in process, the ACP process,
the AG-UI app), so a tool error that lists the known tools reads the same everywhere:
the built-ins `calculate`, `update_plan`, `update_state`, plus `write_note` (kind edit: it
needs permission, for the permission scenarios), `pause` (waits a moment, so a steering
message can arrive while a tool runs) and `wait_for_cancel` (waits until the turn is
cancelled, for cancel-mid-tool). `TOOLS` is what `steerable-bridge acp --tools-module
<this file>` loads; `scenario_tools()` is the whole set. No tool touches the disk.
"""

from __future__ import annotations

from typing import Any

import anyio

from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import TextPart, canonical_json

__all__ = ["PAUSE_S", "TOOLS", "scenario_tools"]

PAUSE_S = 1.0
"""How long `pause` waits: long enough for a client to send a steering message."""


async def _write_note(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    text = str(args["text"])
    return ToolResult(
        content=(TextPart(text=f"noted: {text}"),), raw_output_json=canonical_json({"note": text})
    )


async def _pause(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    await anyio.sleep(PAUSE_S)
    return ToolResult(content=(TextPart(text="paused"),))


async def _wait_for_cancel(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    await anyio.sleep(25.0)
    return ToolResult(content=(TextPart(text="nobody cancelled"),))


WRITE_NOTE = Tool(
    name="write_note",
    description="Write a short note (asks permission first).",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    kind="edit",
    handler=_write_note,
    timeout_s=5.0,
    title=lambda args: f"Write note {args['text']!r}",
)
PAUSE = Tool(
    name="pause",
    description="Wait a moment.",
    kind="think",
    handler=_pause,
    timeout_s=10.0,
)
WAIT_FOR_CANCEL = Tool(
    name="wait_for_cancel",
    description="Wait until the turn is cancelled.",
    kind="think",
    handler=_wait_for_cancel,
    timeout_s=30.0,
)

_BUILTIN_NAMES = {tool.name for tool in builtin_tools()}
TOOLS: list[Tool] = [
    *(t for t in builtin_tools(shared_state=True) if t.name not in _BUILTIN_NAMES),
    WRITE_NOTE,
    PAUSE,
    WAIT_FOR_CANCEL,
]
"""What `--tools-module` adds to the ACP agent's built-ins (update_state and the three above)."""


def scenario_tools() -> tuple[Tool, ...]:
    """Every tool a scenario may call, in the order the transports register them."""
    return (*builtin_tools(shared_state=True), WRITE_NOTE, PAUSE, WAIT_FOR_CANCEL)
