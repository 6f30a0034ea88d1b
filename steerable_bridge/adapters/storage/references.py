"""Model requests stored by reference: what a stored request's items mean.

Every model request repeats the history its session already logged: the messages of the
previous request, the tool results and user prompts just logged as events. A store keeps a
request's messages as a list of items (record format 3): a JSON object is a message written
out; `[a, b]` stands for the messages a..b-1 of the base request (`refs.base`, the
session's previous request); an integer is the seq of an event whose own message
(`projection.event_message`: a tool result, a user prompt, a hook's note, a compaction
summary) it is; `[STEP, a, b]` (format 5) is the assistant message the events a..b make
(one model call's deltas and tool calls, through its `model_response`), so an answer is
stored once, in its deltas. A reference is written only when the message it stands for is
equal to the one in the request, so the rebuilt request is the logged one, exactly. A
system prompt and tools equal to the base's are kept as digests (`digest`,
`tools_digest`); a request without a base (after a compaction) quotes them from the newest
request whose row holds them written out (`system_at` / `tools_at`: that seq and a digest).
Format 2's `request_ref` (a base and a prefix length) still reads. `request_writer.py`
writes these items and `request_resolver.py` rebuilds requests from them; nothing here
touches a database.
"""

from __future__ import annotations

import hashlib
import json

from steerable_bridge.runtime.ports.model import ToolSpec

__all__ = ["STEP", "digest", "tools_digest"]

STEP = "from"
"""The tag of a message item `["from", first, last]`: the one assistant message that the
events first..last (after a request, through its `model_response`) make, exactly as
`projection.history_entries` makes it (format 5)."""


def digest(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of `text`'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def tools_digest(tools: tuple[ToolSpec, ...]) -> str:
    """The digest of the compact JSON `[[name, description, parameters_json], ...]`."""
    return digest(json.dumps([[t.name, t.description, t.parameters_json] for t in tools]))
