"""Our own far server's streamed compaction (CUSTOM `steerable.compaction*`) → the bridged turn.

When the AG-UI server `acp --agui-url` bridges is ours, it sends each compaction as CUSTOM
events whose value is the whole LoopEvent: `steerable.compaction_started`, one
`steerable.compaction_summary_delta` per piece of the summary as its model writes it, then
`steerable.compaction` or `steerable.compaction_dropped`. `FarCompactions.handle` logs the
same events in the bridge's turn (the editor's ACP renderer then shows them as
`compaction_update` / `compaction_summary_chunk`s), keyed by the far compaction id. The far
event's seq and through_seq are the far log's: the bridge's compaction summarizes what its
own log held before the start, so `through_seq` is the seq before its `compaction_started`.
What the bridge sends the far server is unaffected (`history.thread_messages` keeps the
whole thread). A value that is not such an event is skipped (logged), and so is a
compaction that did not stream (a fold of the far server's tool results); a compaction left
open when the run ends is dropped (`close`).
"""

from __future__ import annotations

import dataclasses
import logging

from pydantic import ValidationError

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.turns.turn import Emit

__all__ = ["NAMES", "FarCompactions"]

log = logging.getLogger(__name__)

_KINDS = ("compaction_started", "compaction_summary_delta", "compaction", "compaction_dropped")
NAMES = frozenset(f"steerable.{kind}" for kind in _KINDS)
"""The CUSTOM event names this module takes."""

_ENVELOPE = ("session_id", "run_id", "seq", "ts", "kind")


class FarCompactions:
    """The far server's compactions in one bridged turn (see the module docstring)."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._open: dict[str, int] = {}
        """Far compaction id → the bridge log's seq just before its start."""

    async def handle(self, value: object) -> None:
        try:
            far = codec.event_from_jsonable(value)
        except ValidationError as error:
            log.debug("a CUSTOM compaction event that is not one: %s", error)
            return
        if not isinstance(
            far,
            ev.CompactionStarted | ev.CompactionSummaryDelta | ev.Compaction | ev.CompactionDropped,
        ):
            return
        fields = {
            f.name: getattr(far, f.name) for f in dataclasses.fields(far) if f.name not in _ENVELOPE
        }
        if isinstance(far, ev.Compaction) and not far.compaction_id:
            return  # a fold of the far server's tool results: nothing the editor follows
        cid = far.compaction_id
        if cid not in self._open:
            trigger = getattr(far, "trigger", "pressure")
            started = await self._emit(ev.CompactionStarted, compaction_id=cid, trigger=trigger)
            self._open[cid] = started.seq - 1
            if isinstance(far, ev.CompactionStarted):
                return
        elif isinstance(far, ev.CompactionStarted):
            return
        if isinstance(far, ev.CompactionSummaryDelta):
            await self._emit(ev.CompactionSummaryDelta, **fields)
            return
        through = self._open.pop(cid)
        if isinstance(far, ev.Compaction):
            await self._emit(ev.Compaction, **{**fields, "through_seq": through})
        else:
            await self._emit(ev.CompactionDropped, **fields)

    async def close(self) -> None:
        """Drop what is still open: the far run ended before its compaction did."""
        for cid in list(self._open):
            del self._open[cid]
            await self._emit(
                ev.CompactionDropped,
                compaction_id=cid,
                reason="failed",
                detail="the far server's run ended before this compaction did",
            )
