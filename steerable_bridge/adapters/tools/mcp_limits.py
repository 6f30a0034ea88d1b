"""How much of an MCP server's tool list reaches the model: a bounded, explained cut.

A server's `tools/list` is untrusted input that lands in every model request: hundreds of
tools, megabyte schemas or page-long names would crowd out the conversation (and model
APIs refuse requests with too many tools). `cap_tools(server, tools, limits)` keeps, in
the server's own order, the tools whose name is at most `limits.max_name_chars` long and
whose input schema is at most `limits.max_schema_bytes` of JSON, then at most
`limits.max_tools` of those; descriptions longer than `limits.max_description_chars` are
shortened (the tool stays). It returns the kept tools and, when anything was left out, a
note for the user naming what and why. Pure: no I/O, no logging of tool contents.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import mcp_types

__all__ = ["McpLimits", "cap_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLimits:
    """Per-server bounds on the tools offered to the model."""

    max_tools: int = 64
    max_name_chars: int = 128
    max_schema_bytes: int = 16 * 1024
    max_description_chars: int = 2000


def cap_tools(
    server: str, tools: Sequence[mcp_types.Tool], limits: McpLimits
) -> tuple[tuple[mcp_types.Tool, ...], str | None]:
    """The tools to offer and a note about those left out (None when none were)."""
    long_names: list[str] = []
    big_schemas: list[str] = []
    fitting: list[mcp_types.Tool] = []
    for tool in tools:
        if not tool.name or len(tool.name) > limits.max_name_chars:
            long_names.append(tool.name[:40])
            continue
        size = len(json.dumps(tool.input_schema or {}, separators=(",", ":")).encode())
        if size > limits.max_schema_bytes:
            big_schemas.append(tool.name)
            continue
        fitting.append(_short_description(tool, limits.max_description_chars))
    kept, over = fitting[: limits.max_tools], fitting[limits.max_tools :]
    reasons: list[str] = []
    if over:
        reasons.append(
            f"{len(over)} beyond the first {limits.max_tools} ({_names(t.name for t in over)})"
        )
    if big_schemas:
        reasons.append(
            f"{len(big_schemas)} with an input schema over {limits.max_schema_bytes} bytes"
            f" ({_names(big_schemas)})"
        )
    if long_names:
        reasons.append(f"{len(long_names)} with a name over {limits.max_name_chars} characters")
    if not reasons:
        return tuple(kept), None
    left = len(tools) - len(kept)
    note = (
        f"MCP server {server!r} lists {len(tools)} tools; {len(kept)} are offered to the model"
        f" and {left} left out: {'; '.join(reasons)}. Ask its maintainer for a smaller tool"
        " list, or split it across servers"
    )
    return tuple(kept), note


def _short_description(tool: mcp_types.Tool, limit: int) -> mcp_types.Tool:
    text = tool.description
    if text is None or len(text) <= limit:
        return tool
    return tool.model_copy(update={"description": text[: limit - 1] + "…"})


def _names(names: Iterable[str], shown: int = 5) -> str:
    listed = list(names)
    head = ", ".join(listed[:shown])
    return head + (f", … {len(listed) - shown} more" if len(listed) > shown else "")
