"""A compact decoder written from the renderer's docstring, so tests can prove the AG-UI
rendering lossless without depending on the conformance package."""

from __future__ import annotations

import json
from typing import Any

from steerable_bridge.runtime import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import canonical_json

NATIVE: dict[str, dict[str, str]] = {
    "RUN_ERROR": {"code": "code", "message": "message"},
    "TEXT_MESSAGE_START": {"messageId": "message_id"},
    "TEXT_MESSAGE_CONTENT": {"messageId": "message_id", "delta": "delta"},
    "TEXT_MESSAGE_END": {"messageId": "message_id"},
    "REASONING_START": {"messageId": "message_id"},
    "REASONING_MESSAGE_CONTENT": {"messageId": "message_id", "delta": "delta"},
    "REASONING_MESSAGE_END": {"messageId": "message_id"},
    "TOOL_CALL_START": {
        "toolCallId": "call_id",
        "toolCallName": "name",
        "parentMessageId": "parent_message_id",
    },
    "TOOL_CALL_ARGS": {"toolCallId": "call_id", "delta": "delta"},
    "TOOL_CALL_END": {"toolCallId": "call_id"},
    "TOOL_CALL_RESULT": {"toolCallId": "call_id"},
}


def frames(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body (comments skipped)."""
    out = []
    for block in body.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            assert all(line.startswith("data: ") for line in lines), block
            out.append(json.loads("\n".join(line[6:] for line in lines)))
    return out


def decode(events: list[dict[str, Any]]) -> list[LoopEvent]:
    """LoopEvents from AG-UI events (JSON objects, camelCase) of one or more runs."""
    out: list[LoopEvent] = []
    thread = ""
    for event in events:
        kind = event["type"]
        if kind == "RUN_STARTED":
            thread = event["threadId"]
        own = (event.get("metadata") or {}).get("steerable")
        if own is not None and own.get("derived"):
            continue
        if kind == "CUSTOM" and event["name"].startswith("steerable."):
            out.append(codec.event_from_jsonable(event["value"]))
            continue
        assert own is not None, f"{kind} carries no steerable metadata"
        data: dict[str, Any] = {
            field: event[key] for key, field in NATIVE.get(kind, {}).items() if key in event
        }
        if kind == "STATE_SNAPSHOT":
            data["state_json"] = canonical_json(event["snapshot"])
        elif kind == "STATE_DELTA":
            data["patch_json"] = canonical_json(event["delta"])
        elif kind == "ACTIVITY_SNAPSHOT":
            data["entries"] = event["content"]["entries"]
        data.update(own)
        data["session_id"] = thread
        data["ts"] = event["timestamp"]
        out.append(codec.event_from_jsonable(data))
    return out
