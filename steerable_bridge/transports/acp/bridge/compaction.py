"""A bridged agent's v1.25 compaction updates → our compaction events (no I/O).

The SDK 0.12.1 client models reject `compaction_update` / `compaction_summary_chunk`, so
its `session_update` handler never sees them. The bridge advertises
`clientCapabilities.session.compaction` to the agent, watches the raw incoming messages
(`observer`: a connection observer, called as each message arrives), reads these two
updates with the generated `schema/stable.py` models into a `ChildCompaction` and hands it
to the session's running prompt like any other update. The SDK runs each notification's
handler in a task of its own, started in arrival order; the observer hands its update over
with `call_soon`, which runs after the first step of every task started before it (where
the bridge's `session_update` delivers), so the prompt sees the updates in wire order.
`CompactionMapper` then makes our events of them, one compaction id at a time:

| the agent sends                           | we log                                          |
|-------------------------------------------|-------------------------------------------------|
| compaction_update in_progress (new id)    | compaction_started (the agent's id)             |
| compaction_summary_chunk (text)           | compaction_summary_delta (compaction_started    |
|                                           | first when the id is new)                       |
| compaction_update completed               | compaction: the update's `summary` when it has  |
|                                           | one, else the chunks joined                     |
| compaction_update failed / cancelled      | compaction_dropped (failed / cancelled, error)  |

The trigger and token figures come from `_meta.steerable` when the agent is ours; another
agent's compaction is logged with trigger `pressure` (it compacted on its own) and no
figures. A compaction the prompt left open is dropped (`failed`) when the prompt ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from acp.connection import StreamDirection, StreamEvent

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import CompactionTrigger

__all__ = ["ChildCompaction", "CompactionMapper", "observer"]

log = logging.getLogger("steerable_bridge.acp.bridge")

_KINDS = frozenset({"compaction_update", "compaction_summary_chunk"})
_TRIGGERS = frozenset(get_args(CompactionTrigger))
Emission = tuple[type[ev.EventBase], dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildCompaction:
    """One compaction update of the bridged agent: a chunk (`text`) or a status change."""

    compaction_id: str
    status: str | None = None
    """None for a summary chunk; in_progress / completed / failed / cancelled otherwise."""
    text: str = ""
    """A chunk's text, or a status update's whole `summary` text (empty: none given)."""
    has_summary: bool = False
    error: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    """The update's `_meta.steerable` (present when the agent is ours)."""


def parse(message: Mapping[str, Any]) -> tuple[str, ChildCompaction] | None:
    """(session id, update) for a raw `session/update` carrying a compaction update; None
    for any other message, or one that does not match the v1.25 schema (logged)."""
    if message.get("method") != "session/update":
        return None
    params = message.get("params")
    update = params.get("update") if isinstance(params, Mapping) else None
    if not isinstance(update, Mapping) or update.get("sessionUpdate") not in _KINDS:
        return None
    from pydantic import ValidationError

    from steerable_bridge.transports.acp.schema import stable

    try:
        notification = stable.SessionNotification.model_validate(params)
    except ValidationError as error:
        log.warning("the bridged agent sent a malformed compaction update: %s", error)
        return None
    parsed = notification.update.root
    if isinstance(parsed, stable.SessionUpdate14):
        block = parsed.content.root
        text = block.text if isinstance(block, stable.ContentBlock1) else ""
        item = ChildCompaction(
            compaction_id=parsed.compaction_id.root, text=text, meta=_ours(parsed.field_meta)
        )
    elif isinstance(parsed, stable.SessionUpdate13):
        summary = parsed.summary or []
        texts = [b.root.text for b in summary if isinstance(b.root, stable.ContentBlock1)]
        item = ChildCompaction(
            compaction_id=parsed.compaction_id.root,
            status=str(parsed.status.root),
            text="".join(texts),
            has_summary=parsed.summary is not None,
            error=parsed.error,
            meta=_ours(parsed.field_meta),
        )
    else:
        return None
    return notification.session_id.root, item


def _ours(meta: object) -> Mapping[str, Any]:
    """`_meta.steerable` of an update (empty when the agent is not ours)."""
    ours = meta.get("steerable") if isinstance(meta, Mapping) else None
    return ours if isinstance(ours, Mapping) else {}


def observer(deliver: Callable[[str, ChildCompaction], None]) -> Callable[[StreamEvent], None]:
    """A connection observer handing every incoming compaction update to `deliver`."""

    def observe(event: StreamEvent) -> None:
        if event.direction != StreamDirection.INCOMING:
            return
        found = parse(event.message)
        if found is not None:  # after the handlers of the messages that came before it
            asyncio.get_running_loop().call_soon(deliver, *found)

    return observe


@dataclass(slots=True)
class _Open:
    trigger: CompactionTrigger
    parts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CompactionMapper:
    """The compaction events of one child prompt (see the module docstring)."""

    open: dict[str, _Open] = field(default_factory=dict)

    def update(self, item: ChildCompaction) -> list[Emission]:
        out: list[Emission] = []
        cid = item.compaction_id
        current = self.open.get(cid)
        if current is None:
            if item.status not in (None, "in_progress"):  # an end with no start: say both
                log.debug("compaction %s ended without a start", cid)
            trigger = item.meta.get("trigger")
            current = self.open[cid] = _Open(
                trigger=trigger if trigger in _TRIGGERS else "pressure"  # type: ignore[arg-type]
            )
            out.append((ev.CompactionStarted, {"compaction_id": cid, "trigger": current.trigger}))
        if item.status is None:
            if item.text:
                current.parts.append(item.text)
                out.append((ev.CompactionSummaryDelta, {"compaction_id": cid, "delta": item.text}))
            return out
        if item.status == "completed":
            del self.open[cid]
            meta = item.meta
            summary = item.text if item.has_summary else "".join(current.parts)
            out.append(
                (
                    ev.Compaction,
                    {
                        "compaction_id": cid,
                        "summary": summary,
                        "trigger": current.trigger,
                        "pre_tokens": _count(meta.get("pre_tokens")),
                        "post_tokens": _count(meta.get("post_tokens")),
                        "turns": _count(meta.get("turns")),
                        "fallback": meta.get("fallback") is True,
                    },
                )
            )
        elif item.status in ("failed", "cancelled"):
            del self.open[cid]
            out.append(_dropped(cid, "cancelled" if item.status == "cancelled" else "failed",
                                item.error or ""))  # fmt: skip
        return out

    def close(self) -> list[Emission]:
        """Drop every compaction the prompt left open: it was never applied."""
        out = [
            _dropped(cid, "failed", "the bridged agent's turn ended before this compaction did")
            for cid in self.open
        ]
        self.open.clear()
        return out


def _dropped(cid: str, reason: str, detail: str) -> Emission:
    return (ev.CompactionDropped, {"compaction_id": cid, "reason": reason, "detail": detail})


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
