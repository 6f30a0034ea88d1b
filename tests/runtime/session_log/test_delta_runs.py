"""A log that holds its stored deltas folded reads exactly as the one that does not: every
view, every replay after any seq, and the coalesced replay, for any stream of deltas."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import history_entries, session_facts
from steerable_bridge.runtime.ports.storage import SessionRecord
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.session_log.replay import coalesce_deltas, coalesced_after
from tests.lanes import examples

_KINDS: list[tuple[type[Any], str]] = [
    (ev.TextDelta, "message_id"),
    (ev.ReasoningDelta, "message_id"),
    (ev.ToolCallDelta, "call_id"),
]

_piece = st.tuples(
    st.sampled_from(range(len(_KINDS))),
    st.sampled_from(["m1", "m2"]),
    st.sampled_from(["r1", "r2"]),
    st.text(max_size=6),
    st.integers(min_value=-3, max_value=70_000),  # ts gaps: backwards, 0, beyond 16 bits
)


def _events(pieces: list[tuple[int, str, str, str, int]], boundary: list[bool]) -> list[Any]:
    out: list[Any] = []
    ts = 1_700_000_000_000
    for seq, ((kind, ident, run, text, gap), cut) in enumerate(zip(pieces, boundary, strict=True)):
        ts += gap
        if cut:
            out.append(ev.TextEnd(session_id="s", run_id=run, seq=seq, ts=ts, message_id=ident))
            continue
        cls, key = _KINDS[kind]
        fields = {key: ident, "delta": text}
        out.append(cls(session_id="s", run_id=run, seq=seq, ts=ts, **fields))
    return out


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(_piece, min_size=0, max_size=40).flatmap(
        lambda p: st.tuples(st.just(p), st.lists(st.booleans(), min_size=len(p), max_size=len(p)))
    )
)
def test_a_folded_log_reads_exactly_as_the_events_logged(data: Any) -> None:
    pieces, boundary = data
    events = _events(pieces, boundary)
    plain = SessionLog("s", events)  # no store: nothing folds
    folded = SessionLog("s", events, store=MemoryStore())
    assert list(plain.view().entries()) == events
    view = folded.view()
    assert list(view) == events
    assert len(view) == len(events)
    assert [view[i] for i in range(len(events))] == events
    assert [view[-1 - i] for i in range(len(events))] == events[::-1]
    holder = SimpleNamespace(log=folded)  # all of it in memory: no store read
    for seq in range(-1, len(events) + 1):
        after = [e for e in events if e.seq > seq]
        assert folded.exact_after(seq) == after
        replayed = anyio.run(coalesced_after, holder, seq)
        assert replayed == list(coalesce_deltas(after))
    assert folded.next_seq == len(events)
    assert folded.base == 0
    assert history_entries(view.folded()) == history_entries(events)
    assert session_facts(view.folded()) == session_facts(events)


def test_a_turn_s_deltas_are_held_as_one_run_once_stored_and_read_back_exactly() -> None:
    async def main() -> None:
        store = MemoryStore()
        await store.create(SessionRecord(session_id="s", cwd="/w", created_at=0, updated_at=0))
        log = SessionLog("s", store=store)
        log.record(ev.TextStart, "r1", message_id="m")
        for word in ("Hel", "lo", ", ", "world"):
            log.record(ev.TextDelta, "r1", message_id="m", delta=word)
        log.record(ev.TextEnd, "r1", message_id="m")
        before = list(log.view())
        log.fold()  # nothing is stored yet: nothing folds
        assert len(log.view().entries()) == 6
        await log.commit()
        log.fold()
        entries = log.view().entries()
        assert [type(e).__name__ for e in entries] == ["TextStart", "DeltaRun", "TextEnd"]
        assert list(log.view()) == before
        assert log.exact_after(2) == before[3:]
        log.record(ev.RunFinished, "r1", stop_reason="end_turn")
        assert [e.kind for e in log.view()][-2:] == ["text_end", "run_finished"]

    anyio.run(main)


def test_each_commit_folds_what_it_stored_and_the_turn_end_fold_makes_one_run_per_message() -> None:
    async def main() -> None:
        store = MemoryStore()
        await store.create(SessionRecord(session_id="s", cwd="/w", created_at=0, updated_at=0))
        log = SessionLog("s", store=store)
        log.record(ev.TextStart, "r1", message_id="m")
        for word in ("Hel", "lo"):
            log.record(ev.TextDelta, "r1", message_id="m", delta=word)
        await log.commit()  # mid-turn: what is stored is folded at once
        early = log.view()
        assert [type(e).__name__ for e in early.entries()] == ["TextStart", "DeltaRun"]
        for word in (", ", "wor", "ld"):
            log.record(ev.TextDelta, "r1", message_id="m", delta=word)
        await log.commit()  # the message goes on streaming: a second run, its text not rejoined
        names = [type(e).__name__ for e in log.view().entries()]
        assert names == ["TextStart", "DeltaRun", "DeltaRun"]
        log.record(ev.TextEnd, "r1", message_id="m")
        await log.commit()
        exact = [(e.seq, getattr(e, "delta", None)) for e in log.view()]
        assert exact == [
            (0, None),
            (1, "Hel"),
            (2, "lo"),
            (3, ", "),
            (4, "wor"),
            (5, "ld"),
            (6, None),
        ]
        log.fold()  # the turn's end: one run per message
        entries = log.view().entries()
        assert [type(e).__name__ for e in entries] == ["TextStart", "DeltaRun", "TextEnd"]
        assert entries[1].event.delta == "Hello, world"  # type: ignore[union-attr]
        assert [(e.seq, getattr(e, "delta", None)) for e in log.view()] == exact
        assert [e.seq for e in early] == [0, 1, 2]  # a view taken before keeps what it read
        assert log.exact_after(3) == list(log.view())[4:]

    anyio.run(main)
