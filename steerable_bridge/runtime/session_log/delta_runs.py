"""A message's streamed deltas held in memory as one folded run, re-expanded exactly.

A live model logs one `text_delta` (or `reasoning_delta`, `tool_call_delta`,
`compaction_summary_delta`) per token, and
a session log that kept each one as an object would hold a long conversation in hundreds of
bytes per token. Once those events are in the store, `SessionLog.fold` replaces each stretch
of consecutive deltas of one message (same kind, run id and message or call id, consecutive
seqs) by a `DeltaRun`: the coalesced event (the first delta's seq, ts and ids, every delta's
text joined: what `replay.coalesce_deltas` makes of them) plus each delta's length and the
gaps between their timestamps, packed in the smallest `array` type that holds them.
`DeltaRun.events()` gives back the very events that were logged, field for field, so an
exact view of the log, the lossless replay and resume from an SSE id stay exact, while the
projections (history, facts, transcripts) read the coalesced event: they join the deltas'
text anyway. Which kinds fold, and by which id field, is read from the event classes at
import: a kind that grew another field would not fold (a run could never drop it).
Pure: no I/O, used by `log.py` and `replay.py`.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent

__all__ = [
    "Delta",
    "DeltaRun",
    "Entry",
    "entry_event",
    "entry_last_seq",
    "fold_entries",
    "run_key",
]

Delta = ev.TextDelta | ev.ReasoningDelta | ev.ToolCallDelta | ev.CompactionSummaryDelta

_ENVELOPE = {"session_id", "run_id", "seq", "ts", "kind"}


def _key_field(cls: type[Delta], key: str) -> str | None:
    names = {field.name for field in dataclasses.fields(cls)}
    return key if names == _ENVELOPE | {key, "delta"} else None


_KEYS: dict[type, str] = {
    cls: key
    for cls, key in (
        (ev.TextDelta, _key_field(ev.TextDelta, "message_id")),
        (ev.ReasoningDelta, _key_field(ev.ReasoningDelta, "message_id")),
        (ev.ToolCallDelta, _key_field(ev.ToolCallDelta, "call_id")),
        (ev.CompactionSummaryDelta, _key_field(ev.CompactionSummaryDelta, "compaction_id")),
    )
    if key is not None
}
"""Delta class → the field naming its message, for the kinds that fold."""

_UNSIGNED = ("B", "H", "I", "Q")
_SIGNED = ("b", "h", "i", "q")


def _packed(values: list[int], codes: tuple[str, ...]) -> array[int] | None:
    """`values` in the smallest array type of `codes` that holds them (None: none does)."""
    for code in codes:
        try:
            return array(code, values)
        except OverflowError:
            continue
    return None


@dataclass(frozen=True, slots=True)
class DeltaRun:
    """Two or more consecutive deltas of one message, folded (see the module docstring)."""

    event: Delta
    """The coalesced event: the first delta's envelope and ids, every delta's text joined."""
    cuts: array[int]
    """Each delta's text length, in code points."""
    gaps: array[int]
    """Delta i + 1's ts minus delta i's (one fewer than `cuts`)."""

    @property
    def seq(self) -> int:
        return self.event.seq

    @property
    def last_seq(self) -> int:
        return self.event.seq + len(self.cuts) - 1

    def __len__(self) -> int:
        return len(self.cuts)

    @classmethod
    def packed(cls, event: Delta, cuts: list[int], gaps: list[int]) -> DeltaRun | None:
        """The run whose coalesced event is `event`, with these lengths and ts gaps; None
        when they do not pack."""
        packed_cuts, packed_gaps = _packed(cuts, _UNSIGNED), _packed(gaps, _SIGNED)
        if packed_cuts is None or packed_gaps is None:
            return None
        return cls(event, packed_cuts, packed_gaps)

    def events(self, after_seq: int = -1) -> list[Delta]:
        """The deltas it folds with seq above `after_seq`, exactly as they were logged."""
        event = self.event
        cls = type(event)
        key = _KEYS[cls]
        ident = getattr(event, key)
        text, cuts, gaps = event.delta, self.cuts, self.gaps
        session_id, run_id, seq, ts = event.session_id, event.run_id, event.seq, event.ts
        out: list[Delta] = []
        at = 0
        for i, cut in enumerate(cuts):
            if i:
                ts += gaps[i - 1]
            if seq + i > after_seq:
                fields = {key: ident, "delta": text[at : at + cut]}
                out.append(cls(session_id=session_id, run_id=run_id, seq=seq + i, ts=ts, **fields))
            at += cut
        return out

    def at(self, index: int) -> Delta:
        """The `index`-th delta it folds (0-based), as logged."""
        event = self.event
        offset = sum(self.cuts[:index])
        fields = {_KEYS[type(event)]: getattr(event, _KEYS[type(event)])}
        return type(event)(
            session_id=event.session_id,
            run_id=event.run_id,
            seq=event.seq + index,
            ts=event.ts + sum(self.gaps[:index]),
            delta=event.delta[offset : offset + self.cuts[index]],
            **fields,
        )

    def coalesced_after(self, after_seq: int) -> Delta:
        """The deltas above `after_seq` as one coalesced event (the first of them's seq
        and ts, their text joined); the run's own event when all of it is above."""
        first = self.event.seq
        if after_seq < first:
            return self.event
        skip = after_seq - first + 1
        offset = sum(self.cuts[:skip])
        ts = self.event.ts + sum(self.gaps[:skip])
        return dataclasses.replace(
            self.event, seq=after_seq + 1, ts=ts, delta=self.event.delta[offset:]
        )


Entry = LoopEvent | DeltaRun
"""What a log holds: an event, or a run of deltas folded."""


def entry_event(entry: Entry) -> LoopEvent:
    """The event an entry stands for in a projection (a run: its coalesced event)."""
    return entry.event if isinstance(entry, DeltaRun) else entry


def entry_last_seq(entry: Entry) -> int:
    return entry.last_seq if isinstance(entry, DeltaRun) else entry.seq


def _joined(stretch: list[Entry]) -> DeltaRun | None:
    """One run of the consecutive deltas (plain, or runs already) of one message, built
    from their lengths and stamps without an event per delta; None when they do not pack."""
    texts: list[str] = []
    cuts: list[int] = []
    gaps: list[int] = []
    last_ts: int | None = None
    for item in stretch:
        event = entry_event(item)
        if last_ts is not None:
            gaps.append(event.ts - last_ts)
        if isinstance(item, DeltaRun):
            texts.append(item.event.delta)
            cuts += item.cuts
            gaps += item.gaps
            last_ts = event.ts + sum(item.gaps)
        else:
            texts.append(event.delta)  # type: ignore[union-attr]
            cuts.append(len(event.delta))  # type: ignore[union-attr]
            last_ts = event.ts
    first = entry_event(stretch[0])
    return DeltaRun.packed(dataclasses.replace(first, delta="".join(texts)), cuts, gaps)  # type: ignore[arg-type]


def run_key(event: LoopEvent) -> tuple[type, str, str] | None:
    """What makes consecutive deltas one run: the delta's class, run id and message (or
    call) id; None for an event that never folds."""
    key = _KEYS.get(type(event))
    if key is None:
        return None
    return (type(event), event.run_id, getattr(event, key))


def fold_entries(entries: Iterable[Entry]) -> Iterator[Entry]:
    """`entries` with each stretch of consecutive deltas of one message (plain or already
    folded) as one `DeltaRun`; everything else as it is."""
    stretch: list[Entry] = []
    key: tuple[type, str, str] | None = None
    last = -2

    def flush() -> Iterator[Entry]:
        if len(stretch) == 1:
            yield stretch[0]
        elif stretch:
            run = _joined(stretch)
            if run is None:
                for item in stretch:
                    yield from item.events() if isinstance(item, DeltaRun) else (item,)
            else:
                yield run
        stretch.clear()

    for entry in entries:
        event = entry_event(entry)
        entry_key = run_key(event)
        if entry_key is None or entry_key != key or event.seq != last + 1:
            yield from flush()
            key = entry_key
        if entry_key is None:
            yield entry
            continue
        stretch.append(entry)
        last = entry_last_seq(entry)
    yield from flush()
