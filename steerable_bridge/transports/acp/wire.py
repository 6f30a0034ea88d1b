"""The `session/update` params of the hot kinds (text and thought chunks), without SDK models.

A streamed answer is mostly `text_delta` / `reasoning_delta` events, each one
`agent_message_chunk` / `agent_thought_chunk`. Through the SDK each costs a validated update
model (`AcpRenderer.render`), a validated `SessionNotification` (`session_update`) and a
`model_dump` back to a dict, most of what the ACP side spends on one (the figures are in
`bench/bridge_agui.py`). `chunk_params(session_id, event)` builds that same dict directly,
key for key and in the order `model_dump(by_alias=True, exclude_none=True)` gives, so the
frame the SDK connection then sends (`Connection.send_notification`, its framing and
observers) is byte for byte the model path's; `tests/transports/acp/test_wire.py` proves it
for both kinds.
Every other event, and a replayed delta folding several (`last_seq`), goes through the
renderer. No I/O.
"""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev

__all__ = ["chunk_params"]


def chunk_params(session_id: str, event: ev.TextDelta | ev.ReasoningDelta) -> dict[str, Any]:
    """The params of the `session/update` notification `event` becomes (see module docstring)."""
    kind = "agent_message_chunk" if type(event) is ev.TextDelta else "agent_thought_chunk"
    meta = {"kind": event.kind, "seq": event.seq, "ts": event.ts, "run_id": event.run_id}
    return {
        "sessionId": session_id,
        "update": {
            "content": {"text": event.delta, "type": "text"},
            "messageId": event.message_id,
            "_meta": {"steerable": meta},
            "sessionUpdate": kind,
        },
    }
