"""Streamed deltas stored in runs: several deltas of one message in one row, unfolded exactly.

A live model leaves one `text_delta` (or `reasoning_delta`, `tool_call_delta`) per token,
and one row per token is most of what a long session stores. So a durable store folds each
batch's consecutive deltas of one message — same kind, run id and message (or call) id,
consecutive seqs — into one *run* row (record format 5, `formats.py`), and a read unfolds it
into the very events that were appended, field for field: a run keeps each delta's text,
and each delta's seq and ts follow from the row's columns. The row's `seq` and `ts` columns
are those of the run's *last* delta, so a read of the seqs above N (`seq > N`) selects every
run holding one, and the unfolding drops the deltas at or below N (`unfold(..., from_seq)`).
The body starts with the `"run"` key, which no other body has first (`is_run` tells them
apart without parsing):

    {"run":[gap, ...],"message_id":"m1","parts":["Hel","lo"," world"]}

`parts` holds each delta's text in order; `run[i]` is the ts of delta i + 1 minus that of
delta i (milliseconds, often 0), so the last delta's ts is the column and the earlier ones
follow back from it. A run holds at most `MAX_PARTS` deltas and `MAX_CHARS` characters of
text, so a row stays small. Which kinds fold, and by which id field, is read from the event
classes at import (`FOLDED`): a kind that grew another field would no longer fold (its
deltas would be stored one per row, as before), so a run can never lose a field. Used by
`sql.event_rows` to write and `decoding.py` / `references.Resolver` to read; it never
touches a connection.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from steerable_bridge.adapters.storage.formats import Row, corrupt
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent

__all__ = [
    "FOLDED",
    "MAX_CHARS",
    "MAX_PARTS",
    "encode_run",
    "fold",
    "unfold",
]

MAX_PARTS = 4096
"""Deltas per run row at most."""

MAX_CHARS = 256 * 1024
"""Characters of delta text per run row at most (a longer message takes several rows)."""

_ENVELOPE = {"session_id", "run_id", "seq", "ts", "kind"}

Delta = ev.TextDelta | ev.ReasoningDelta | ev.ToolCallDelta
_DELTAS = (ev.TextDelta, ev.ReasoningDelta, ev.ToolCallDelta)


def _foldable(cls: type[Delta], key: str) -> tuple[type[Delta], str] | None:
    names = {field.name for field in dataclasses.fields(cls)}
    return (cls, key) if names == _ENVELOPE | {key, "delta"} else None


FOLDED: dict[str, tuple[type[Delta], str]] = {
    kind: found
    for kind, found in (
        ("text_delta", _foldable(ev.TextDelta, "message_id")),
        ("reasoning_delta", _foldable(ev.ReasoningDelta, "message_id")),
        ("tool_call_delta", _foldable(ev.ToolCallDelta, "call_id")),
    )
    if found is not None
}
"""Kind → (event class, the field naming its message): the deltas that fold into runs."""


def fold(batch: Sequence[LoopEvent]) -> list[LoopEvent | tuple[Delta, ...]]:
    """The batch with each stretch of two or more consecutive deltas of one message (see
    the module docstring) replaced by the tuple of them, in order."""
    out: list[LoopEvent | tuple[Delta, ...]] = []
    run: list[Delta] = []
    chars = 0

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(tuple(run))
        run.clear()

    for event in batch:
        spec = FOLDED.get(event.kind)
        if spec is None or not isinstance(event, _DELTAS):
            flush()
            out.append(event)
            continue
        size = len(event.delta)
        if run:
            last = run[-1]
            key = spec[1]
            if (
                last.kind != event.kind
                or last.seq + 1 != event.seq
                or last.run_id != event.run_id
                or last.session_id != event.session_id
                or getattr(last, key) != getattr(event, key)
                or len(run) >= MAX_PARTS
                or chars + size > MAX_CHARS
            ):
                flush()
                chars = 0
        run.append(event)
        chars += size
    flush()
    return out


def encode_run(run: Sequence[Delta]) -> str:
    """The data column of a run row (two or more deltas from `fold`)."""
    first = run[0]
    key = FOLDED[first.kind][1]
    gaps = [run[i].ts - run[i - 1].ts for i in range(1, len(run))]
    body = {
        "run": gaps,
        key: getattr(first, key),
        "parts": [event.delta for event in run],
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def unfold(session_id: str, row: Row, from_seq: int = 0) -> list[LoopEvent]:
    """The deltas a run row holds with seq ≥ `from_seq`, exactly as they were appended;
    raises StoreError `corrupt_record` naming the row's seqs when it does not decode."""
    seq, _, kind, run_id, ts, data = row
    what = f"the run of deltas ending at event seq {seq} of session {session_id}"
    spec = FOLDED.get(kind)
    if spec is None:
        raise corrupt(what, f"kind {kind!r} is not stored in runs")
    cls, key = spec
    try:
        body: Any = json.loads(data)
        gaps, parts, message = body["run"], body["parts"], body[key]
        if not (
            type(ts) is int
            and type(seq) is int
            and isinstance(body, dict)
            and set(body) == {"run", "parts", key}
            and isinstance(message, str)
            and isinstance(parts, list)
            and len(parts) >= 2
            and all(isinstance(part, str) for part in parts)
            and isinstance(gaps, list)
            and len(gaps) == len(parts) - 1
            and all(type(gap) is int for gap in gaps)
        ):
            raise ValueError("its fields are not a run's")
    except (ValueError, KeyError, TypeError) as err:
        raise corrupt(what, str(err)) from None
    count = len(parts)
    first = seq - count + 1
    stamps = [ts] * count
    for i in range(count - 1, 0, -1):
        stamps[i - 1] = stamps[i] - gaps[i - 1]
    start = max(0, from_seq - first)
    fields: dict[str, Any] = {"session_id": session_id, "run_id": run_id, key: message}
    return [cls(seq=first + i, ts=stamps[i], delta=parts[i], **fields) for i in range(start, count)]
