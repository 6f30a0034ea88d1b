"""One model call's events as the request writer keeps them until the call ends.

The store's request writer (`request_writer.py`) names the assistant message a model call made
by the seqs of that call's events, and needs the events to know the message. A live model
logs one delta per token, and a writer that kept each delta event would keep every one of
them alive until the call ends, long after the session log has folded them
(`runtime/session_log/delta_runs.py`): on a server streaming many calls at once that is most of the
heap, and the arenas those events fill stay behind after the burst. `StepEvents` keeps the
other events as they are and each stretch of consecutive deltas of one message as its first
event and the deltas' texts (strings the log's history holds anyway), and gives them back
as events with each stretch coalesced — what the projection reads of them anyway. Pure: no
I/O.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.session_log.delta_runs import Delta, DeltaRun, run_key

__all__ = ["StepEvents"]


class StepEvents:
    """The events after one model request, deltas held as text (see the module docstring)."""

    __slots__ = ("_head", "_items", "_key", "_texts", "count", "first_seq", "last_seq")

    def __init__(self) -> None:
        self.count = 0
        """How many events it took in (each delta counts as one)."""
        self.first_seq = -1
        self.last_seq = -1
        self._items: list[LoopEvent] = []
        self._head: Delta | None = None
        """The first delta of the stretch now open (its envelope and ids)."""
        self._texts: list[str] = []
        self._key: tuple[type, str, str] | None = None

    def add(self, event: LoopEvent) -> None:
        """Take in the next event (seqs ascending)."""
        key = run_key(event)
        if key is None:
            self._close()
            self._items.append(event)
            if not self.count:
                self.first_seq = event.seq
            self.last_seq = event.seq
            self.count += 1
        else:  # only the delta kinds have a run key
            self._extend(cast(Delta, event), key, event.seq, 1)

    def add_run(self, run: DeltaRun) -> None:
        """`add` of each of the run's deltas in turn, without making them (a run is a
        stretch of deltas of one message: its coalesced event is what `events` gives)."""
        self._extend(run.event, run_key(run.event), run.last_seq, len(run))

    def _extend(
        self, delta: Delta, key: tuple[type, str, str] | None, last_seq: int, count: int
    ) -> None:
        """Take `count` deltas of one message from `delta` (its text all of theirs) to
        `last_seq`: onto the open stretch when they continue it, else as a new one."""
        if key == self._key and delta.seq == self.last_seq + 1:
            self._texts.append(delta.delta)
        else:
            self._close()
            self._head, self._key, self._texts = delta, key, [delta.delta]
        if not self.count:
            self.first_seq = delta.seq
        self.last_seq = last_seq
        self.count += count

    def events(self) -> list[LoopEvent]:
        """The events taken in, each stretch of deltas of one message as one coalesced
        event (the first delta's envelope, the texts joined)."""
        self._close()
        return self._items

    def _close(self) -> None:
        head = self._head
        if head is None:
            return
        texts = self._texts
        self._items.append(
            head if len(texts) == 1 else dataclasses.replace(head, delta="".join(texts))
        )
        self._head, self._key, self._texts = None, None, []
