"""Replaying a session to a client: its whole visible log, and streamed deltas coalesced.

`visible_log(session)` is every event of the session in seq order, compaction or not: a
session loaded from the store holds only the tail the model still sees (`read_tail`), so the
events before it are read back from the store and merged with the log in memory (which may
hold events not yet committed). `coalesce_deltas(events)` folds each run of consecutive
`text_delta`, `reasoning_delta`, `tool_call_delta` or `compaction_summary_delta` events of
one message (one tool call for arguments, one compaction for its summary) in one run into
a single event of that kind: the first event's seq, ts and ids, the deltas' text joined;
`folded` gives how many events it stands for. Replays use it because clients do not depend
on chunk boundaries: the ACP spec (agent-client-protocol,
`docs/protocol/session-setup.mdx`) says the agent MUST replay the entire conversation as
`session/update` notifications "like `session/prompt`", and its example replays a whole
answer as one `agent_message_chunk`; chunks are pieces of one message that the client
appends (grouped by `messageId` when present), with no rule on their size. An
AG-UI client concatenates TEXT_MESSAGE_CONTENT / TOOL_CALL_ARGS deltas the same way. The
lossless `_steerable/event` channel does not use it: it still gets every event as logged.
Pure apart from the one store read of `visible_log`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent

if TYPE_CHECKING:
    from steerable_bridge.runtime.session import Session

__all__ = ["Coalesced", "coalesce_deltas", "merged", "missing_events", "visible_log"]

_Delta = ev.TextDelta | ev.ReasoningDelta | ev.ToolCallDelta | ev.CompactionSummaryDelta


@dataclass(frozen=True, slots=True)
class Coalesced:
    """One replayed event and how many logged events it stands for (1 unless folded)."""

    event: LoopEvent
    folded: int = 1
    last_seq: int = -1
    """The seq of the last event folded into it (its own seq when nothing was folded)."""


def _key(event: LoopEvent) -> tuple[str, str, str] | None:
    if isinstance(event, ev.TextDelta | ev.ReasoningDelta):
        return (event.kind, event.run_id, event.message_id)
    if isinstance(event, ev.ToolCallDelta):
        return (event.kind, event.run_id, event.call_id)
    if isinstance(event, ev.CompactionSummaryDelta):
        return (event.kind, event.run_id, event.compaction_id)
    return None


def _folded(first: _Delta, parts: list[str], last_seq: int) -> Coalesced:
    if len(parts) == 1:
        return Coalesced(first, 1, last_seq)
    return Coalesced(replace(first, delta="".join(parts)), len(parts), last_seq)


def coalesce_deltas(events: Iterable[LoopEvent]) -> Iterator[Coalesced]:
    """`events` with each run of consecutive deltas of one message folded (module docstring)."""
    first: _Delta | None = None
    key: tuple[str, str, str] | None = None
    parts: list[str] = []
    last_seq = -1
    for event in events:
        event_key = _key(event)
        if first is not None:
            if event_key is not None and event_key == key:
                parts.append(event.delta)  # type: ignore[union-attr]
                last_seq = event.seq
                continue
            yield _folded(first, parts, last_seq)
            first = None
        if event_key is None:
            yield Coalesced(event, 1, event.seq)
            continue
        first, key, parts, last_seq = event, event_key, [event.delta], event.seq  # type: ignore[assignment, union-attr]
    if first is not None:
        yield _folded(first, parts, last_seq)


def _complete(view: Sequence[LoopEvent]) -> bool:
    """True when `view` (ascending seqs) is the whole log: seqs 0 .. len-1, none missing."""
    return not view or (view[0].seq == 0 and view[-1].seq == len(view) - 1)


async def missing_events(session: Session) -> list[LoopEvent]:
    """The stored events of the session its log in memory does not hold (those before the
    tail it was loaded with), in seq order; none when the log is whole."""
    view = session.log.view()
    if _complete(view):
        return []
    held = {event.seq for event in view}
    stored = await session.agent.store.read(session.id)
    return [event for event in stored if event.seq not in held]


def merged(earlier: Iterable[LoopEvent], view: Iterable[LoopEvent]) -> list[LoopEvent]:
    """Two seq-ordered event lists as one, in seq order."""
    return list(heapq.merge(earlier, view, key=lambda event: event.seq))


async def visible_log(session: Session) -> list[LoopEvent]:
    """Every event of the session in seq order (see the module docstring)."""
    view = session.log.view()
    earlier = await missing_events(session)
    return merged(earlier, view) if earlier else list(view)
