"""Model requests on the AG-UI wire: each by reference to the thread's previous one.

Every `model_request` repeats the history the thread's previous request held, so sent whole
(CUSTOM `steerable.model_request`, the event as its value) a 100-turn thread's run carried
the whole thread again. `RequestChain` (one per thread, shared by its runs; `Threads` feeds
it the thread's log, so the first request after a restart has its base too) renders a
request that follows an earlier one of the thread as what is new: the value is the event
with `request.messages` holding only the messages after the ones it shares with its base,
`request.system` / `request.tools` left out when they equal the base's, and
`request_ref` = `{base, prefix, messages, tokens, system, tools}`: the seq of the base (the
newest request the thread logged before this one), how many of its first messages start
this one, how many messages the request holds, its prompt-token estimate
(`runtime.model_context.tokens`), and digests of its system prompt and tools (`system_digest`,
`tools_digest`: a client sees when either changed, a decoder checks what it rebuilt). The
thread's first request, and every request of a run that asked for them whole
(`forwardedProps.steerable.full_requests: true`), are the event itself. The rendering is a
function of the log alone, so a resumed stream (`resume.py`) renders it byte for byte as the
live one did. Pure; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent, ModelRequestEvent
from steerable_bridge.runtime.model_context.tokens import RequestEstimator
from steerable_bridge.runtime.ports.model import ToolSpec
from steerable_bridge.runtime.values import Message

__all__ = ["REF_KEY", "RequestChain", "shared_prefix", "system_digest", "tools_digest"]

REF_KEY = "request_ref"
"""The key of a request sent by reference (the CUSTOM value holds it beside `request`)."""


def system_digest(system: str) -> str:
    """The first 16 hex digits of the SHA-256 of the system prompt's UTF-8 bytes."""
    return hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]


def tools_digest(tools: tuple[ToolSpec, ...]) -> str:
    """`system_digest` of the compact JSON `[[name, description, parameters_json], ...]`."""
    listed = [[t.name, t.description, t.parameters_json] for t in tools]
    return system_digest(json.dumps(listed, ensure_ascii=False, separators=(",", ":")))


def shared_prefix(old: tuple[Message, ...], new: tuple[Message, ...]) -> int:
    """How many first messages `new` shares with `old` (cheap when they are the same objects:
    a step's request holds the previous one's messages)."""
    if new[: len(old)] == old:
        return len(old)
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and a != b:
            break
        count += 1
    return count


@dataclass(slots=True)
class RequestChain:
    """One thread's requests as the wire carries them (see the module docstring)."""

    base: ModelRequestEvent | None = None
    """The newest request of the thread taken in: the base of the next one."""
    _estimator: RequestEstimator = field(default_factory=RequestEstimator, init=False)
    _digests: dict[str, tuple[object, str]] = field(default_factory=dict, init=False)
    """The last system prompt / tools digested, and its digest (they rarely change)."""
    _last: tuple[ModelRequestEvent, bool, str] | None = field(default=None, init=False)
    """The last request rendered, how, and its value's JSON (renderer and fast path agree)."""

    def note(self, event: LoopEvent) -> None:
        """Take in an event of the thread's log (only requests matter; a newer one wins)."""
        if isinstance(event, ModelRequestEvent) and (
            self.base is None or event.seq > self.base.seq
        ):
            self.base = event

    def forget(self) -> None:
        self.base = None
        self._last = None

    def value_json(self, event: ModelRequestEvent, *, full: bool = False) -> str:
        """The JSON text of the CUSTOM value for `event` (whole when `full`, when the
        thread logged no request before it, or when its base is not known), then `event`
        is the base of the next request."""
        last = self._last
        if last is not None and last[0] is event and last[1] is full:
            return last[2]
        base = self.base
        if full or base is None or base.seq >= event.seq:
            text = codec.event_to_json(event)
        else:
            text = self._by_reference(event, base)
        self.note(event)
        self._last = (event, full, text)
        return text

    def _by_reference(self, event: ModelRequestEvent, base: ModelRequestEvent) -> str:
        new, old = event.request, base.request
        prefix = shared_prefix(old.messages, new.messages)
        left_out: dict[str, bool] = {}
        if new.system == old.system:
            left_out["system"] = True
        if new.tools == old.tools:
            left_out["tools"] = True
        slim = event
        if prefix:
            slim = _with_messages(event, new.messages[prefix:])
        text = codec.event_to_json(slim, exclude={"request": left_out} if left_out else None)
        ref = {
            "base": base.seq,
            "prefix": prefix,
            "messages": len(new.messages),
            "tokens": self._estimator.estimate(new),
            "system": self._digest("system", new.system),
            "tools": self._digest("tools", new.tools),
        }
        return f'{text[:-1]},"{REF_KEY}":{json.dumps(ref, separators=(",", ":"))}}}'

    def _digest(self, what: str, value: str | tuple[ToolSpec, ...]) -> str:
        known = self._digests.get(what)
        if known is not None and (known[0] is value or known[0] == value):
            return known[1]
        digest = system_digest(value) if isinstance(value, str) else tools_digest(value)
        self._digests[what] = (value, digest)
        return digest


def _with_messages(event: ModelRequestEvent, messages: tuple[Message, ...]) -> ModelRequestEvent:
    return replace(event, request=replace(event.request, messages=messages))
