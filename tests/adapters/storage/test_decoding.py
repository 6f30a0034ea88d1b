"""Bulk decoding of stored rows: the same events as row-by-row decoding, the same errors."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from steerable_bridge.adapters.storage import decoding
from steerable_bridge.adapters.storage.decoding import decode_rows, plain_rows
from steerable_bridge.adapters.storage.formats import (
    FORMAT,
    Row,
    is_reference,
    with_envelope,
    with_envelopes,
)
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.request_writer import RequestWriter
from steerable_bridge.adapters.storage.sql import event_rows
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.codec import event_to_json
from steerable_bridge.runtime.ports.model import Message, ModelRequest
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.values import TextPart
from tests.adapters.storage.logs import long_session

SID = "s1"


def with_requests() -> list[ev.LoopEvent]:
    """The shared long session with three model requests, each extending the one before."""
    log: list[ev.LoopEvent] = list(long_session(SID))
    messages: tuple[Message, ...] = ()
    for turn in range(3):
        text = (TextPart(text=f"ask {turn}"),)
        messages += (Message(id=f"u{turn}", role="user", content=text),)
        request = ModelRequest(model="m", system="be brief", messages=messages)
        log.append(
            ev.ModelRequestEvent(
                session_id=SID, run_id="r2", seq=len(log), ts=5000, step=turn, request=request
            )
        )
        log += [
            ev.TextDelta(session_id=SID, run_id="r2", seq=len(log) + i, ts=5001, message_id="m",
                         delta=f"d{i}")
            for i in range(5)
        ]  # fmt: skip
    return log


def stored(log: list[ev.LoopEvent], *, runs: bool = False) -> list[Row]:
    """The rows a store keeps for `log`: one per event (each appended alone, as deltas
    that are not folded are), or with `runs` the whole log in one batch, its deltas folded."""
    writer = RequestWriter()
    batches = [log] if runs else [[event] for event in log]
    return [
        (seq, found, kind, run_id, ts, data)
        for batch in batches
        for _, seq, kind, run_id, ts, _, found, data in event_rows(SID, batch, writer)
    ]


def test_bulk_decoding_gives_the_events_one_by_one_decoding_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = with_requests()
    rows = stored(log)
    assert sum(is_reference(row) for row in rows) == 2  # requests stored by reference
    full = log[4]  # an older format (the full JSON) goes through the upgrade chain
    rows[4] = (full.seq, 2, full.kind, full.run_id, full.ts, event_to_json(full))
    assert plain_rows(rows).count(False) == 3
    assert decode_rows(Resolver(SID), rows) == Resolver(SID).decode_all(rows) == log
    assert decode_rows(Resolver(SID), rows, final=True) == log
    monkeypatch.setattr(decoding, "CHUNK", 3)  # long runs go in several calls
    assert decode_rows(Resolver(SID), rows) == log
    as_bytes = [(*row[:5], str(row[5]).encode()) for row in rows]
    assert decode_rows(Resolver(SID), as_bytes) == log


def test_references_to_events_decoded_in_bulk_resolve_and_extra_rows_are_left_out() -> None:
    log = with_requests()
    rows = stored(log)
    first = next(i for i, e in enumerate(log) if isinstance(e, ev.ModelRequestEvent))
    assert not is_reference(rows[first]) and is_reference(rows[first + 6])
    resolver = Resolver(SID)
    assert decode_rows(resolver, rows[: first + 3]) == log[: first + 3]
    assert decode_rows(resolver, rows[first + 3 :]) == log[first + 3 :]
    partial = Resolver(SID)  # a read after a seq: the base row was fetched as `extra`
    partial.extra = {row[0]: row for row in rows[: first + 1]}
    assert decode_rows(partial, rows[first + 1 :]) == log[first + 1 :]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: "{not json",
        lambda data: data + "," + data,
        lambda data: data.replace('"delta":"old "', '"delta":7'),
        lambda data: '"a string"',
        lambda data: data.replace("{", '{"seq":8,', 1),
    ],
)
def test_a_damaged_row_is_named_by_its_seq(damage: Callable[[str], str]) -> None:
    rows = stored(with_requests())
    seq, found, kind, run_id, ts, data = rows[7]
    assert kind == "text_delta" and '"delta":"old "' in str(data)
    rows[7] = (seq, found, kind, run_id, ts, damage(str(data)))
    with pytest.raises(StoreError) as err:
        decode_rows(Resolver(SID), rows)
    assert err.value.code == "corrupt_record" and "seq 7 " in err.value.message


def test_envelopes_in_bulk_are_the_envelopes_row_by_row() -> None:
    rows = stored(with_requests())
    rows += [(900, FORMAT, "text_end", 'r"\u00e9', 9, b"{}"), (901, FORMAT, "x", "", 0, "{}")]
    session = json.dumps(SID)
    assert with_envelopes(session, rows) == [with_envelope(session, row) for row in rows]
    with pytest.raises(ValueError):
        with_envelopes(session, [(1, FORMAT, "text_end", "r", 9, "[]")])
