"""Replaying a session to a client: its visible log, exact or with streamed deltas coalesced.

`events_after(session, seq)` is every event of the session above `seq` in seq order,
exactly as logged, compaction or not: from memory when it holds them (runs of deltas it
keeps folded, `delta_runs.py`, are expanded), else — a session loaded from the store holds
only the tail the model still sees (`read_tail`) — from the store, the source of truth,
followed by what memory holds beyond the store's newest (events not committed yet);
`visible_log(session)` is all of it. `coalesce_deltas(events)` folds each run of
consecutive `text_delta`, `reasoning_delta`, `tool_call_delta` or `compaction_summary_delta`
events of one message (one tool call for arguments, one compaction for its summary) in one
run into a single event of that kind: the first event's seq, ts and ids, the deltas' text
joined; `folded` gives how many events it stands for,
`last_seq` the seq of the last. `coalesced_after(session, seq)` gives the same as
`coalesce_deltas(await events_after(session, seq))` without expanding what memory holds
folded, which is what a history snapshot or a load replay costs then: one event per
message, not one per token. Replays use it because clients do not depend on chunk
boundaries: the ACP spec (agent-client-protocol,
`docs/protocol/session-setup.mdx`) says the agent MUST replay the entire conversation as
`session/update` notifications "like `session/prompt`", and its example replays a whole
answer as one `agent_message_chunk`; chunks are pieces of one message that the client
appends (grouped by `messageId` when present), with no rule on their size. An
AG-UI client concatenates TEXT_MESSAGE_CONTENT / TOOL_CALL_ARGS deltas the same way. The
lossless `_steerable/event` channel and resume from an SSE id do not use it: they get
every event as logged (`events_after`). Pure apart from the store reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.session_log.delta_runs import DeltaRun, Entry

if TYPE_CHECKING:
    from steerable_bridge.runtime.agent_sessions.session import Session

__all__ = ["Coalesced", "coalesce_deltas", "coalesced_after", "events_after", "visible_log"]


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


def _merged(items: Iterable[Coalesced]) -> Iterator[Coalesced]:
    """`items` with each run of consecutive deltas of one message as one item."""
    first: Coalesced | None = None
    key: tuple[str, str, str] | None = None
    parts: list[str] = []
    folded = 0
    last_seq = -1

    def done() -> Coalesced:
        assert first is not None
        if len(parts) == 1:
            return first
        event: LoopEvent = replace(first.event, delta="".join(parts))  # type: ignore[arg-type]
        return Coalesced(event, folded, last_seq)

    for item in items:
        item_key = _key(item.event)
        if first is not None:
            if item_key is not None and item_key == key:
                parts.append(item.event.delta)  # type: ignore[union-attr]
                folded += item.folded
                last_seq = item.last_seq
                continue
            yield done()
            first = None
        if item_key is None:
            yield item
            continue
        first, key, parts = item, item_key, [item.event.delta]  # type: ignore[union-attr]
        folded, last_seq = item.folded, item.last_seq
    if first is not None:
        yield done()


def coalesce_deltas(events: Iterable[LoopEvent]) -> Iterator[Coalesced]:
    """`events` with each run of consecutive deltas of one message folded (module docstring)."""
    return _merged(Coalesced(event, 1, event.seq) for event in events)


def _items(entries: Iterable[Entry], seq: int) -> Iterator[Coalesced]:
    for entry in entries:
        if not isinstance(entry, DeltaRun):
            yield Coalesced(entry, 1, entry.seq)
        elif entry.seq > seq:
            yield Coalesced(entry.event, len(entry), entry.last_seq)
        else:  # `seq` falls inside the run: only its deltas above it
            yield Coalesced(entry.coalesced_after(seq), entry.last_seq - seq, entry.last_seq)


async def events_after(session: Session, seq: int = -1) -> list[LoopEvent]:
    """The session's events above `seq`, exactly as logged, in seq order: from memory when
    it holds them all, else from the store (the source of truth) followed by what memory
    holds beyond the store's newest (events not committed yet)."""
    log = session.log
    held = log.exact_after(seq)
    if held is not None:
        return held
    view = log.view()  # before the read: what it holds beyond the store's newest is exact
    stored = await session.agent.store.read(session.id, after_seq=seq)
    newest = stored[-1].seq if stored else seq
    return stored + view.after(newest)


async def coalesced_after(session: Session, seq: int = -1) -> list[Coalesced]:
    """`coalesce_deltas(await events_after(session, seq))`, read from the runs memory holds
    folded without expanding them when it holds everything above `seq`."""
    log = session.log
    if seq + 1 < log.base:
        return list(coalesce_deltas(await events_after(session, seq)))
    return list(_merged(_items(log.view().entries_after(seq), seq)))


async def visible_log(session: Session) -> list[LoopEvent]:
    """Every event of the session in seq order (see the module docstring)."""
    return await events_after(session, -1)
