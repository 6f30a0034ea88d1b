"""`session/update` params for the kinds a streamed turn is made of, built without SDK models.

A streamed answer is one `agent_message_chunk` per token (`agent_thought_chunk` per piece of
reasoning). Building the SDK's pydantic models for each (the chunk, its content block, the
`SessionNotification`) and dumping them again costs more than everything else the agent
does per token. `hot_params(session_id, event)` builds the same params as plain dicts:
exactly the keys, order and values `acp.utils.serialize_params` gives for the notification
of what `AcpRenderer` renders (`tests/transports/acp/test_hot_updates.py` proves it), so
the client cannot tell the paths apart. It answers None for every other kind, which goes
through the renderer and the SDK as before. The frame is still encoded as strict JSON by
`BatchingSender`. No I/O.
"""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent

__all__ = ["hot_params"]

_CHUNK_OF: dict[type[ev.EventBase], str] = {
    ev.TextDelta: "agent_message_chunk",
    ev.ReasoningDelta: "agent_thought_chunk",
}


def hot_params(session_id: str, event: LoopEvent) -> dict[str, Any] | None:
    """The `session/update` params `event` renders to, for the hot kinds; else None."""
    chunk = _CHUNK_OF.get(type(event))
    if chunk is None:
        return None
    assert isinstance(event, ev.TextDelta | ev.ReasoningDelta)
    steerable = {"kind": event.kind, "seq": event.seq, "ts": event.ts, "run_id": event.run_id}
    return {
        "sessionId": session_id,
        "update": {
            "content": {"text": event.delta, "type": "text"},
            "messageId": event.message_id,
            "_meta": {"steerable": steerable},
            "sessionUpdate": chunk,
        },
    }
