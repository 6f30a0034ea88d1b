"""Streamed deltas stored in runs: several deltas of one message in one row, unfolded exactly.

A live model leaves one `text_delta` (or `reasoning_delta`, `tool_call_delta`,
`compaction_summary_delta`) per token,
and one row per token is most of what a long session stores. So a durable store folds each
batch's consecutive deltas of one message — same kind, run id and message (or call) id,
consecutive seqs — into one *run* row (record format 5, `formats.py`), and a read unfolds it
into the very events that were appended, field for field: a run keeps each delta's text and
ts, and each delta's seq follows from the row's columns. The row's `seq` and `ts` columns
are those of the run's *last* delta, so a read of the seqs above N (`seq > N`) selects every
run holding one, and the unfolding drops the deltas at or below N (`unfold(..., from_seq)`).
The body starts with the `"run"` key, which no other body has first (`is_run` tells them
apart without parsing):

    {"run":[0,[1,3]],"message_id":"m1","text":"Hello, big world","cuts":[3,[2,3],7]}

`text` is the deltas' text joined; `cuts` the length of each delta in it (in code points, as
Python counts them); `run` the gaps between the deltas' ts (delta i + 1's minus delta i's,
milliseconds, often 0), so the last delta's ts is the column and the earlier ones follow
back from it. Both lists write a value repeated three or more times as `[value, times]` (a
token-sized stream repeats itself: `[0, 199]`, not 199 zeros). A run holds at most
`MAX_PARTS` deltas and `MAX_CHARS` characters of text, so a row stays small. Unfolding
builds the events by setting their slots (`_builder`), as their `__init__` would, in half
its time. Which kinds fold, and by which id field, is read from the event classes at import
(`FOLDED`): a kind that grew another field would no longer fold (its deltas would be stored
one per row, as before), so a run can never lose a field. Used by `sql.event_rows` to write
and `decoding.py` / `request_resolver.Resolver` to read; it never touches a connection.
"""

from __future__ import annotations

import dataclasses
import json
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from steerable_bridge.adapters.storage.formats import Row, corrupt
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.session_log.delta_runs import DeltaRun

__all__ = [
    "FOLDED",
    "MAX_CHARS",
    "MAX_PARTS",
    "as_run",
    "encode_run",
    "fold",
    "unfold",
]

MAX_PARTS = 4096
"""Deltas per run row at most."""

MAX_CHARS = 256 * 1024
"""Characters of delta text per run row at most (a longer message takes several rows)."""

_ENVELOPE = {"session_id", "run_id", "seq", "ts", "kind"}

Delta = ev.TextDelta | ev.ReasoningDelta | ev.ToolCallDelta | ev.CompactionSummaryDelta
_DELTAS = (ev.TextDelta, ev.ReasoningDelta, ev.ToolCallDelta, ev.CompactionSummaryDelta)


def _foldable(cls: type[Delta], key: str) -> tuple[type[Delta], str] | None:
    names = {field.name for field in dataclasses.fields(cls)}
    return (cls, key) if names == _ENVELOPE | {key, "delta"} else None


FOLDED: dict[str, tuple[type[Delta], str]] = {
    kind: found
    for kind, found in (
        ("text_delta", _foldable(ev.TextDelta, "message_id")),
        ("reasoning_delta", _foldable(ev.ReasoningDelta, "message_id")),
        ("tool_call_delta", _foldable(ev.ToolCallDelta, "call_id")),
        ("compaction_summary_delta", _foldable(ev.CompactionSummaryDelta, "compaction_id")),
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


def _packed(values: list[int]) -> list[int | list[int]]:
    """`values` with each stretch of three or more equal values written `[value, times]`."""
    out: list[int | list[int]] = []
    i, n = 0, len(values)
    while i < n:
        j = i + 1
        while j < n and values[j] == values[i]:
            j += 1
        if j - i >= 3:
            out.append([values[i], j - i])
        else:
            out.extend(values[i:j])
        i = j
    return out


def _unpacked(packed: object) -> list[int]:
    """The inverse of `_packed`; raises ValueError on anything it could not have written."""
    if not isinstance(packed, list):
        raise ValueError("a run's list is not a list")
    out: list[int] = []
    for item in packed:
        if type(item) is int:
            out.append(item)
        elif (
            isinstance(item, list)
            and len(item) == 2
            and type(item[0]) is int
            and type(item[1]) is int
            and 3 <= item[1] <= MAX_PARTS - len(out)
        ):
            out.extend([item[0]] * item[1])
        else:
            raise ValueError(f"{item!r} is neither a number nor [value, times]")
        if len(out) > MAX_PARTS:
            raise ValueError("a run longer than any this build writes")
    return out


def encode_run(run: Sequence[Delta]) -> str:
    """The data column of a run row (two or more deltas from `fold`)."""
    first = run[0]
    key = FOLDED[first.kind][1]
    body = {
        "run": _packed([run[i].ts - run[i - 1].ts for i in range(1, len(run))]),
        key: getattr(first, key),
        "text": "".join([event.delta for event in run]),
        "cuts": _packed([len(event.delta) for event in run]),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _parse(session_id: str, row: Row) -> tuple[str, str, list[int], list[int]]:
    """A run row's (message or call id, text, gaps, cuts); raises StoreError
    `corrupt_record` naming the row's seqs when it does not decode."""
    seq, _, kind, _run_id, ts, data = row
    what = f"the run of deltas ending at event seq {seq} of session {session_id}"
    spec = FOLDED.get(kind)
    if spec is None:
        raise corrupt(what, f"kind {kind!r} is not stored in runs")
    key = spec[1]
    try:
        body: Any = json.loads(data)
        if not isinstance(body, dict) or set(body) != {"run", key, "text", "cuts"}:
            raise ValueError("its fields are not a run's")
        text, message = body["text"], body[key]
        gaps, cuts = _unpacked(body["run"]), _unpacked(body["cuts"])
        if not (
            type(ts) is int
            and type(seq) is int
            and isinstance(message, str)
            and isinstance(text, str)
            and len(cuts) >= 2
            and len(gaps) == len(cuts) - 1
            and min(cuts) >= 0  # (not a generator: a run has hundreds of cuts)
            and sum(cuts) == len(text)
        ):
            raise ValueError("its fields do not describe one run")
    except (ValueError, KeyError, TypeError) as err:
        raise corrupt(what, str(err)) from None
    return message, text, gaps, cuts


def unfold(session_id: str, row: Row, from_seq: int = 0) -> list[LoopEvent]:
    """The deltas a run row holds with seq ≥ `from_seq`, exactly as they were appended;
    raises StoreError `corrupt_record` naming the row's seqs when it does not decode."""
    seq, _, kind, run_id, ts, _data = row
    message, text, gaps, cuts = _parse(session_id, row)
    count = len(cuts)
    first = seq - count + 1
    stamps = [ts] * count
    for i in range(count - 1, 0, -1):
        stamps[i - 1] = stamps[i] - gaps[i - 1]
    parts: list[str] = []
    at = 0
    for cut in cuts:
        parts.append(text[at : at + cut])
        at += cut
    build = _builder(kind)
    return [
        build(session_id, run_id, first + i, stamps[i], message, parts[i])
        for i in range(max(0, from_seq - first), count)
    ]


def as_run(session_id: str, row: Row) -> DeltaRun:
    """A run row as the `DeltaRun` a log holds in memory (`runtime/session_log/delta_runs.py`): the
    coalesced delta (the first delta's seq and ts, the text joined) and each delta's length
    and ts gap, without building an event per delta; raises as `unfold` does."""
    found = _packed_run(session_id, row)
    if found is not None:
        return found
    seq, _, kind, run_id, ts, _data = row
    message, text, gaps, cuts = _parse(session_id, row)
    first = seq - len(cuts) + 1
    event = _builder(kind)(session_id, run_id, first, ts - sum(gaps), message, text)
    run = DeltaRun.packed(event, cuts, gaps)  # type: ignore[arg-type]
    if run is None:
        what = f"the run of deltas ending at event seq {seq} of session {session_id}"
        raise corrupt(what, "its lengths or gaps are out of range")
    return run


_CUT_CODES = ("B", "H", "I", "Q")
_GAP_CODES = ("b", "h", "i", "q")
"""The array types `DeltaRun.packed` picks from, smallest first, for cuts and for gaps."""


def _packed_run(session_id: str, row: Row) -> DeltaRun | None:
    """`as_run` of a well-formed row, its lists read straight into the arrays `DeltaRun`
    keeps (a list of a few `[value, times]` items, not hundreds of numbers one by one);
    None for anything else, which `as_run` then reads the long way and refuses by name."""
    seq, _, kind, run_id, ts, data = row
    spec = FOLDED.get(kind)
    if spec is None or type(seq) is not int or type(ts) is not int:
        return None
    key = spec[1]
    try:
        body: Any = json.loads(data)
    except (ValueError, TypeError):
        return None
    if type(body) is not dict or body.keys() != {"run", key, "text", "cuts"}:
        return None
    text, message = body["text"], body[key]
    if type(text) is not str or type(message) is not str:
        return None
    cuts, length = _array(body["cuts"], _CUT_CODES)
    gaps, span = _array(body["run"], _GAP_CODES)
    if cuts is None or gaps is None or len(cuts) < 2 or len(gaps) != len(cuts) - 1:
        return None
    if length != len(text):
        return None
    event = _builder(kind)(session_id, run_id, seq - len(cuts) + 1, ts - span, message, text)
    return DeltaRun(event, cuts, gaps)  # type: ignore[arg-type]


def _array(packed: object, codes: tuple[str, ...]) -> tuple[array[int] | None, int]:
    """`_unpacked(packed)` in the smallest array type of `codes` that holds it, as
    `DeltaRun.packed` makes it, and its sum; None when `_unpacked` would refuse it or no
    type holds it."""
    if type(packed) is not list:
        return None, 0
    values: list[int] = []
    count = total = 0
    for item in packed:
        if type(item) is int:
            values.append(item)
            count += 1
            total += item
        elif (
            type(item) is list
            and len(item) == 2
            and type(item[0]) is int
            and type(item[1]) is int
            and 3 <= item[1] <= MAX_PARTS - count
        ):
            values.append(item[0])
            count += item[1]
            total += item[0] * item[1]
        else:
            return None, 0
        if count > MAX_PARTS:
            return None, 0
    for code in codes:
        try:
            array(code, [min(values, default=0), max(values, default=0)])
        except OverflowError:
            continue
        out = array(code)
        for item in packed:
            if type(item) is int:
                out.append(item)
            else:
                out += array(code, item[:1]) * item[1]
        return out, total
    return None, 0


Build = Callable[[str, str, int, int, str, str], LoopEvent]

_BUILDERS: dict[str, Build] = {}


def _builder(kind: str) -> Build:
    """A function making a delta of `kind` from (session id, run id, seq, ts, message or call id,
    delta): it sets the slots `__init__` would set, with the same values, skipping its
    per-field checks of a frozen dataclass (the delta classes have no `__post_init__`;
    one that had would be built through `__init__`)."""
    known = _BUILDERS.get(kind)
    if known is not None:
        return known
    cls, key = FOLDED[kind]
    names = ("session_id", "run_id", "seq", "ts", key, "delta")
    if hasattr(cls, "__post_init__"):

        def build(s: str, r: str, q: int, t: int, m: str, d: str) -> LoopEvent:
            return cls(**dict(zip(names, (s, r, q, t, m, d), strict=True)))  # type: ignore[arg-type]

    else:
        slot = {
            name: next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__).__set__
            for name in (*names, "kind")
        }
        set_s, set_r, set_q, set_t = (slot[n] for n in names[:4])
        set_m, set_d, set_k = slot[key], slot["delta"], slot["kind"]
        new = object.__new__

        def build(s: str, r: str, q: int, t: int, m: str, d: str) -> LoopEvent:
            event = new(cls)
            set_s(event, s)
            set_r(event, r)
            set_q(event, q)
            set_t(event, t)
            set_k(event, kind)
            set_m(event, m)
            set_d(event, d)
            return event

    _BUILDERS[kind] = build
    return build
