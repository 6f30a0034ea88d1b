"""ACP transcripts: the ordered JSON-RPC messages of a connection, each tagged with its sender.

A transcript is what the ACP checks and the ACP decoder read: every request, response and
notification, in the order they crossed the wire, in both directions. `WireMessage` is one
entry (`sender` is "client" or "agent"; `message` the JSON object exactly as framed).
`TranscriptRecorder` builds one from the SDK's own stream observer
(`Connection.add_observer`) on the client side of a connection, so nothing is re-serialised
on the way. `as_transcript` also accepts plain `{"sender": ..., "message": ...}` dicts, for
transcripts saved as JSON by other tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from acp.connection import StreamDirection, StreamEvent

__all__ = ["Sender", "TranscriptRecorder", "WireMessage", "as_transcript"]

Sender = Literal["client", "agent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WireMessage:
    """One JSON-RPC message and who sent it."""

    sender: Sender
    message: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"sender": self.sender, "message": dict(self.message)}


def as_transcript(messages: Iterable[object]) -> list[WireMessage]:
    """Normalise a transcript given in any of the accepted shapes.

    Accepted entries: `WireMessage`s; objects with `sender` and `message` attributes;
    `{"sender": ..., "message": {...}}` dicts; and flat JSON-RPC dicts with a `sender` key
    added beside `jsonrpc`.
    """
    out: list[WireMessage] = []
    for index, entry in enumerate(messages):
        if isinstance(entry, WireMessage):
            out.append(entry)
            continue
        sender: object
        message: object
        if isinstance(entry, Mapping):
            sender = entry.get("sender")
            message = entry.get("message")
            if message is None and "jsonrpc" in entry:
                message = {k: v for k, v in entry.items() if k != "sender"}
        else:
            sender = getattr(entry, "sender", None)
            message = getattr(entry, "message", None)
        if sender not in ("client", "agent") or not isinstance(message, Mapping):
            raise ValueError(
                f"transcript entry {index} must be {{'sender': 'client'|'agent', 'message':"
                f" {{...}}}}, got {entry!r}"
            )
        out.append(WireMessage(sender="client" if sender == "client" else "agent", message=message))
    return out


class TranscriptRecorder:
    """Records a connection's traffic; attach it to the *client* side of a connection.

    `conn.add_observer(recorder)` (the SDK's `Connection`): outgoing messages are the
    client's, incoming ones the agent's. The SDK reports an outgoing message only once its
    write has drained, so a very fast answer can be observed before its own request; such a
    response is held back and recorded right after the request it answers.
    """

    def __init__(self) -> None:
        self.messages: list[WireMessage] = []
        self._asked: set[tuple[Sender, object]] = set()
        self._early: dict[tuple[Sender, object], WireMessage] = {}

    def __call__(self, event: StreamEvent) -> None:
        sender: Sender = "client" if event.direction == StreamDirection.OUTGOING else "agent"
        message = event.message
        entry = WireMessage(sender=sender, message=message)
        other: Sender = "agent" if sender == "client" else "client"
        if "method" in message and "id" in message:
            key = (sender, message["id"])
            self._asked.add(key)
            self.messages.append(entry)
            early = self._early.pop(key, None)
            if early is not None:
                self.messages.append(early)
            return
        if "method" not in message and "id" in message:
            key = (other, message["id"])
            if key not in self._asked:
                self._early[key] = entry
                return
        self.messages.append(entry)

    def transcript(self) -> list[WireMessage]:
        """Everything recorded, with any response whose request never showed up at the end."""
        return self.messages + list(self._early.values())
