"""What every store checks and derives when it appends a batch to a session's log.

Sequence numbers must rise strictly above everything stored (a lower one means another
writer got there first: `seq_conflict`), and the session's title is the last one a
`session_info` event in the batch sets. One function, so the memory and SQLite stores
cannot drift apart on either rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from steerable_bridge.runtime.events import LoopEvent, SessionInfo
from steerable_bridge.runtime.ports.storage import StoreError

__all__ = ["check_batch"]


def check_batch(
    session_id: str, last_seq: int, events: Sequence[LoopEvent], title: str | None
) -> str | None:
    """Raise `seq_conflict` unless the batch's seqs rise above `last_seq`; return the title
    the session has after it."""
    last = last_seq
    for event in events:
        if event.seq <= last:
            raise StoreError(
                "seq_conflict",
                f"event seq {event.seq} is not above stored seq {last} in session"
                f" {session_id}; another process may be writing it",
            )
        last = event.seq
        if isinstance(event, SessionInfo) and event.title is not None:
            title = event.title
    return title
