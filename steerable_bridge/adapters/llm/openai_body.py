"""The Chat Completions request body as JSON bytes, each history message encoded once.

A session's every request repeats the whole history: encoding it afresh each step costs
the agent time proportional to the conversation, per step. `BodyEncoder.encode(request)`
gives the bytes of `openai_wire.request_body(request)` — the same JSON as httpx writes
for it (compact separators, UTF-8, no NaN) — but keeps each history message's encoded
entry, keyed by the message object (a step's request holds the previous step's message
objects, `runtime/projection.History`), so a step encodes only the messages that are new.
The cache is bounded (`MAX_MESSAGES`, the least recently used go first) and holds the
messages it encoded alive only while it keeps them. Used by `openai_compat.py`; no I/O.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from steerable_bridge.adapters.llm.openai_wire import body_options, layout, openai_message
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.values import Message

__all__ = ["MAX_MESSAGES", "BodyEncoder"]

MAX_MESSAGES = 8192
"""History messages an encoder keeps encoded (one long session's, or several shorter)."""


def _dumps(value: Any) -> bytes:
    """`value` as httpx's `json=` writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class BodyEncoder:
    """One provider's request bodies as bytes (see the module docstring)."""

    __slots__ = ("_known", "accepts_images", "model")

    def __init__(self, *, model: str, accepts_images: bool) -> None:
        self.model = model
        self.accepts_images = accepts_images
        self._known: OrderedDict[int, tuple[Message, bytes]] = OrderedDict()
        """id(message) → (the message, kept so the id stays its own; its encoded entry)."""

    def encode(self, request: ModelRequest) -> bytes:
        """The bytes of `request_body(request)`, equal to encoding it whole."""
        known = self._known
        entries: list[bytes] = []
        for item in layout(request, accepts_images=self.accepts_images):
            if not isinstance(item, Message):
                entries.append(_dumps(item))
                continue
            key = id(item)
            hit = known.get(key)
            if hit is not None and hit[0] is item:
                known.move_to_end(key)
                entries.append(hit[1])
                continue
            encoded = _dumps(openai_message(item, self.accepts_images))
            known[key] = (item, encoded)
            entries.append(encoded)
        while len(known) > MAX_MESSAGES:
            known.popitem(last=False)
        head = _dumps({"model": self.model})[:-1]
        tail = _dumps(body_options(request))[1:]  # never empty: it holds "stream"
        return b"".join((head, b',"messages":[', b",".join(entries), b"],", tail))
