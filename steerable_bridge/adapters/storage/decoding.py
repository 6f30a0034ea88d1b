"""Decoding many stored rows at once: one parser call for all of a read's complete events.

A durable store reads a log back as rows (`formats.Row`: seq, format, kind, run id, ts,
data) in seq order. Most rows hold a complete event body in this build's record format;
those get their envelope back from their columns (`formats.with_envelopes`), are joined into
one JSON array and validated by one pydantic call (`codec.events_from_json`) for the whole
read — not one per stretch between the other rows: a log's runs of deltas and model
requests fall every few rows, and a call per stretch cost about twice as much as the one
call. Every other row — a run of deltas (`runs.py`), an older format that needs upgrading,
a model request stored by reference — goes through the session's `Resolver` one at a
time, in order, so references resolve exactly as `Resolver.decode_all` resolves them; the
events decoded in bulk are handed to the Resolver (`remember`) in their place in that
order, as later references may point at them. A bulk call that fails, or that yields an
event whose seq or session does not match its row, is redone row by row, so a damaged row
is reported by the same `corrupt_record` error, naming its seq. Used by `sqlite.py` and
`postgres/reads.py`; it never touches a connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from pydantic import ValidationError

from steerable_bridge.adapters.storage import formats
from steerable_bridge.adapters.storage.formats import Row, is_reference, is_run, with_envelopes
from steerable_bridge.adapters.storage.request_resolver import Resolver, kept
from steerable_bridge.runtime.encoding.codec import events_from_json
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.session_log.delta_runs import Entry

__all__ = ["CHUNK", "decode_entries", "decode_rows", "plain_rows"]


def plain_rows(rows: Sequence[Row]) -> list[bool]:
    """For each row, whether it holds a complete event body of this build's format (one
    that decodes on its own, in bulk); the others need the Resolver, perhaps other rows."""
    current = formats.FORMAT  # read now: a test may stand in for a later build
    return [
        row[1] == current and not is_reference(row) and not is_run(row[1], row[5]) for row in rows
    ]


def decode_rows(
    resolver: Resolver,
    rows: Sequence[Row],
    plain: Sequence[bool] | None = None,
    *,
    final: bool = False,
    from_seq: int = 0,
) -> list[LoopEvent]:
    """The events of `rows` (see `decode_entries`), every run unfolded into its deltas."""
    found = decode_entries(resolver, rows, plain, final=final, from_seq=from_seq, runs=False)
    return cast(list[LoopEvent], found)


def decode_entries(
    resolver: Resolver,
    rows: Sequence[Row],
    plain: Sequence[bool] | None = None,
    *,
    final: bool = False,
    from_seq: int = 0,
    runs: bool = True,
) -> list[Entry]:
    """The events of `rows` (one session's, in seq order; `plain` is `plain_rows(rows)` if
    the caller has it), as `resolver.decode_all(rows, from_seq)` gives them: rows the
    resolver holds in `extra` are decoded where their seq falls and left out of the
    result, and so are the deltas of a run below `from_seq` (a read's lower bound: a run
    row is selected by its last seq). Every event decoded is noted in `resolver.events`.
    `final`: the caller decodes nothing more with `resolver`, so events after the last row
    that needs it are not noted in its `requests` and `messages` (nothing could refer to
    them). `runs`: each run row as one `DeltaRun` (`runtime/session_log/delta_runs.py`), as
    a log holds it in memory, instead of an event per delta."""
    extra: set[int] = set()
    if resolver.extra:
        wanted = {row[0] for row in rows}
        extra = {seq for seq in resolver.extra if seq not in wanted}
        rows = sorted([*rows, *(resolver.extra[seq] for seq in extra)])
        resolver.extra.clear()
        plain = None
    if plain is None:
        plain = plain_rows(rows)
    out: list[Entry] = []
    held = resolver.events
    plain_at = [index for index, is_plain in enumerate(plain) if is_plain]
    last_other = max((i for i, is_plain in enumerate(plain) if not is_plain), default=-1)
    decoded = _bulk(resolver, [rows[index] for index in plain_at])
    remember = resolver.remember
    next_plain = 0
    for index, row in enumerate(rows):
        if plain[index]:
            event = decoded[next_plain]
            next_plain += 1
            held.append(event)
            if row[0] not in extra:
                out.append(event)
            if index < last_other or not final:
                remember(event)
            continue
        events = resolver.decode_entries(row, runs=runs)  # noted in `resolver.events`
        if row[0] not in extra:
            out += kept(events, from_seq)
    return out


CHUNK = 4096
"""Rows per bulk call at most: bounds the JSON text a long log is joined into."""


def _bulk(resolver: Resolver, rows: Sequence[Row]) -> list[LoopEvent]:
    """Complete event bodies of this build's format, decoded in one call per `CHUNK`
    (not noted in the resolver)."""
    if len(rows) > CHUNK:
        return [
            event
            for at in range(0, len(rows), CHUNK)
            for event in _bulk(resolver, rows[at : at + CHUNK])
        ]
    if not rows:
        return []
    return _validated(resolver, rows)


def _validated(resolver: Resolver, rows: Sequence[Row]) -> list[LoopEvent]:
    """Complete event bodies of this build's format, decoded in one pydantic call."""
    if len(rows) == 1:
        return [resolver.decode(rows[0])]
    session_json = json.dumps(resolver.session_id)
    try:
        events = events_from_json("[" + ",".join(with_envelopes(session_json, rows)) + "]")
    except (ValidationError, ValueError, UnicodeDecodeError):
        events = []
    if [event.seq for event in events] != [row[0] for row in rows] or {
        event.session_id for event in events
    } != {resolver.session_id}:
        return [resolver.decode(row) for row in rows]  # names the damaged row
    return events
