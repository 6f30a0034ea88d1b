"""SSE framing for tests, and the conformance suite's AG-UI decoder under a short name."""

from __future__ import annotations

import json
from typing import Any

from steerable_bridge.conformance import decode_agui
from steerable_bridge.runtime.events import LoopEvent


def frames(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body (comments and `id:` lines skipped)."""
    out = []
    for block in body.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines and lines[0].startswith("id: "):
            lines = lines[1:]
        if lines:
            assert all(line.startswith("data: ") for line in lines), block
            out.append(json.loads("\n".join(line[6:] for line in lines)))
    return out


def decode(events: list[dict[str, Any]]) -> list[LoopEvent]:
    """LoopEvents from AG-UI events (JSON objects, camelCase) of one or more runs."""
    return decode_agui(events)
