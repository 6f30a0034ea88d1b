"""Streamed deltas stored in runs (record format 5): rows ≈ messages, and every read gives
back exactly the events appended — across commit boundaries, from inside a run, after a
crash between commits, beside older rows — on SQLite and PostgreSQL; a newer format is
refused by name. And the first model request after a reload is stored by reference."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage import formats
from steerable_bridge.adapters.storage.decoding import decode_rows
from steerable_bridge.adapters.storage.formats import Row, is_reference, is_run
from steerable_bridge.adapters.storage.integrity import check_store, salvage_events
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.request_writer import RequestWriter
from steerable_bridge.adapters.storage.runs import FOLDED, MAX_PARTS, as_run, fold, unfold
from steerable_bridge.adapters.storage.sql import event_rows
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.encoding.codec import event_to_json
from steerable_bridge.runtime.ports.storage import (
    SessionRecord,
    SessionStore,
    StoreError,
    read_tail,
    read_tail_entries,
)
from steerable_bridge.runtime.session_log.delta_runs import DeltaRun, Entry, fold_entries
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.lanes import examples

pytestmark = pytest.mark.timeout(60)

SID = "s1"


def rows_of(batches: list[list[ev.LoopEvent]]) -> list[Row]:
    writer = RequestWriter()
    return [
        (seq, found, kind, run_id, ts, data)
        for batch in batches
        for _, seq, kind, run_id, ts, _, found, data in event_rows(SID, batch, writer)
    ]


def streamed(texts: list[tuple[str, str, str, int]], start: int = 0) -> list[ev.LoopEvent]:
    """Deltas from (kind, id, text, ts) tuples, with consecutive seqs from `start`."""
    out: list[ev.LoopEvent] = []
    for i, (kind, key, text, ts) in enumerate(texts):
        base: dict[str, Any] = {"session_id": SID, "run_id": "r1", "seq": start + i, "ts": ts}
        if kind == "tool_call_delta":
            out.append(ev.ToolCallDelta(call_id=key, delta=text, **base))
        elif kind == "reasoning_delta":
            out.append(ev.ReasoningDelta(message_id=key, delta=text, **base))
        elif kind == "compaction_summary_delta":
            out.append(ev.CompactionSummaryDelta(compaction_id=key, delta=text, **base))
        else:
            out.append(ev.TextDelta(message_id=key, delta=text, **base))
    return out


_texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_deltas = st.lists(
    st.tuples(
        st.sampled_from(
            ["text_delta", "reasoning_delta", "tool_call_delta", "compaction_summary_delta"]
        ),
        st.sampled_from(["m1", "m2", 'q"\\é']),
        st.one_of(st.sampled_from(["", "ab", "token "]), _texts),  # repeats are packed
        st.one_of(st.integers(0, 2), st.integers(min_value=-(2**40), max_value=2**41)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=examples(150), deadline=None)
@given(texts=_deltas, cuts=st.lists(st.integers(0, 40), max_size=4), after=st.integers(-1, 45))
def test_any_deltas_in_any_batches_read_back_exactly_from_any_seq(
    texts: list[tuple[str, str, str, int]], cuts: list[int], after: int
) -> None:
    log: list[ev.LoopEvent] = [
        ev.RunStarted(session_id=SID, run_id="r1", seq=0, ts=1, model="m"),
        *streamed(texts, start=1),
        ev.RunFinished(
            session_id=SID, run_id="r1", seq=len(texts) + 1, ts=2, stop_reason="end_turn"
        ),
    ]
    bounds = sorted({0, len(log), *(c for c in cuts if c < len(log))})
    batches = [log[a:b] for a, b in itertools.pairwise(bounds)]
    rows = rows_of(batches)
    assert Resolver(SID).decode_all(rows) == log
    assert decode_rows(Resolver(SID), rows, final=True) == log
    selected = [row for row in rows if row[0] > after]  # what `seq > after` selects
    assert decode_rows(Resolver(SID), selected, from_seq=after + 1) == log[after + 1 :]


@settings(max_examples=examples(150), deadline=None)
@given(texts=_deltas)
def test_a_run_row_read_whole_is_the_run_its_deltas_fold_into(
    texts: list[tuple[str, str, str, int]],
) -> None:
    """`as_run` reads a row's packed lists straight into arrays: the same `DeltaRun`, array
    types included, as folding the deltas the row unfolds into."""
    for row in rows_of([streamed(texts)]):
        if not is_run(row[1], row[5]):
            continue
        whole = as_run(SID, row)
        folded = list(fold_entries(unfold(SID, row)))
        assert folded == [whole]
        assert (whole.cuts.typecode, whole.gaps.typecode) == (
            folded[0].cuts.typecode,
            folded[0].gaps.typecode,
        )


def test_a_messages_deltas_take_one_row_and_keep_each_seq_ts_and_text() -> None:
    log = streamed([("text_delta", "m1", t, 100 + i // 3) for i, t in enumerate('Hé"l\\lo 👋 ')])
    log += streamed([("tool_call_delta", "c1", '{"a"', 300), ("tool_call_delta", "c1", ":1}", 299)])
    log += streamed([("compaction_summary_delta", "k1", t, 400) for t in ("Sum", "mary", ".")])
    log = [dataclasses.replace(e, seq=i) for i, e in enumerate(log)]
    rows = rows_of([log])
    assert [(row[0], row[2], row[4]) for row in rows] == [
        (9, "text_delta", 103),  # keyed by its last delta
        (11, "tool_call_delta", 299),
        (14, "compaction_summary_delta", 400),  # a streamed compaction summary: one row
    ]
    assert all(is_run(row[1], row[5]) for row in rows)
    assert Resolver(SID).decode_all(rows) == log


def test_runs_break_at_another_message_kind_run_or_a_gap_and_at_the_size_bound() -> None:
    log = streamed([("text_delta", "m1", "a", 1)] * 3 + [("text_delta", "m2", "b", 1)] * 2)
    log.append(dataclasses.replace(log[-1], seq=len(log) + 1))  # a gap in seqs
    log.append(dataclasses.replace(log[-1], seq=log[-1].seq + 1, run_id="r2"))
    assert [len(i) if isinstance(i, tuple) else 1 for i in fold(log)] == [3, 2, 1, 1]
    many = streamed([("text_delta", "m1", "x", 1)] * (MAX_PARTS + 5))
    assert [len(i) if isinstance(i, tuple) else 1 for i in fold(many)] == [MAX_PARTS, 5]


def test_every_delta_kind_folds_and_no_event_body_can_look_like_a_run() -> None:
    assert set(FOLDED) == {
        "text_delta",
        "reasoning_delta",
        "tool_call_delta",
        "compaction_summary_delta",
    }
    for cls in ev.EVENT_TYPES:  # a body starts with its first field that is not a column
        assert "run" not in {f.name for f in dataclasses.fields(cls)}


def test_a_damaged_run_is_named_never_skipped_and_a_newer_one_is_refused() -> None:
    log = streamed([("text_delta", "m1", "ab", 5)] * 4)
    (row,) = rows_of([log])
    assert row[5] == '{"run":[[0,3]],"message_id":"m1","text":"abababab","cuts":[[2,4]]}'
    good = str(row[5])
    for damage in (
        '{"run":[0,0,0],"message_id":"m1","parts":["a"]}',  # another layout
        '{"run":',
        good.replace('"cuts":[[2,4]]', '"cuts":[[2,3]]'),  # cuts that do not cover the text
        good.replace('"cuts":[[2,4]]', '"cuts":[[2,99999999999]]'),  # never allocated
        good.replace('"run":[[0,3]]', '"run":[0,"0",0]'),
        good.replace('"m1"', "7"),
    ):
        assert damage != good
        for runs in (False, True):  # unfolded, or kept whole (`as_run`)
            with pytest.raises(StoreError) as err:
                Resolver(SID).decode_entries((*row[:5], damage), runs=runs)
            assert err.value.code == "corrupt_record"
            assert "ending at event seq 3" in err.value.message
    with pytest.raises(StoreError) as newer:
        Resolver(SID).decode_all([(row[0], formats.FORMAT + 1, *row[2:])])
    assert newer.value.code == "format_too_new"
    assert f"record format {formats.FORMAT + 1}" in newer.value.message
    assert "upgrade steerable-bridge" in newer.value.message


# -- both durable stores ---------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
async def opener(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], SessionStore]]:
    """Open stores on one database; each stands in for one process."""
    opened: list[Any] = []

    def open_store() -> SessionStore:
        store: Any
        if request.param == "postgresql":
            from steerable_bridge.adapters.storage.postgres import PostgresStore

            store = PostgresStore(request.getfixturevalue("pg_url"))
        else:
            store = SqliteStore(tmp_path / "sessions.db")
        opened.append(store)
        return store  # type: ignore[no-any-return]

    yield open_store
    for store in opened:
        await store.aclose()


def record(sid: str = SID) -> SessionRecord:
    return SessionRecord(session_id=sid, cwd="/w", created_at=1, updated_at=1)


def turn(start: int, message: str, n: int) -> list[ev.LoopEvent]:
    base: dict[str, Any] = {"session_id": SID, "run_id": f"r{start}", "message_id": message}
    events: list[ev.LoopEvent] = [ev.TextStart(seq=start, ts=start, **base)]
    events += [
        ev.TextDelta(seq=start + 1 + i, ts=start + i // 4, delta=f"t{i} ", **base) for i in range(n)
    ]
    events.append(ev.TextEnd(seq=start + n + 1, ts=start + n, **base))
    return events


@pytest.mark.anyio
async def test_a_store_reads_runs_back_exactly_across_commits_and_from_inside_a_run(
    opener: Callable[[], SessionStore],
) -> None:
    store = opener()
    await store.create(record())
    log = turn(0, "m1", 30) + turn(32, "m2", 10)
    for a, b in ((0, 5), (5, 17), (17, 31), (31, 40), (40, len(log))):  # commits mid-message
        await store.append(SID, log[a:b])
    fresh = opener()
    assert await fresh.read(SID) == log
    for after in range(-1, len(log)):
        assert await fresh.read(SID, after_seq=after) == log[after + 1 :]
    assert await read_tail(fresh, SID) == log
    entries = await read_tail_entries(opener(), SID)
    assert expanded(entries) == log
    assert sum(isinstance(entry, DeltaRun) for entry in entries) >= 2  # folded, not per token


def expanded(entries: list[Entry]) -> list[ev.LoopEvent]:
    """What a log holding `entries` reads as (`SessionLog.view`)."""
    return [
        e
        for entry in entries
        for e in (entry.events() if isinstance(entry, DeltaRun) else (entry,))
    ]


@pytest.mark.anyio
async def test_a_crash_between_commits_keeps_what_was_committed_and_the_message_continues(
    opener: Callable[[], SessionStore],
) -> None:
    first = opener()
    await first.create(record())
    log = SessionLog(SID, store=first)
    log.record(ev.TextStart, "r1", message_id="m1")
    for i in range(6):
        log.record(ev.TextDelta, "r1", message_id="m1", delta=f"a{i}")
    await log.commit()
    committed = list(log.view())
    for i in range(4):  # streamed, never committed: the process dies here
        log.record(ev.TextDelta, "r1", message_id="m1", delta=f"lost{i}")
    second = opener()
    stored = await read_tail(second, SID)
    assert stored == committed
    resumed = SessionLog(SID, stored, store=second)
    for i in range(3):
        resumed.record(ev.TextDelta, "r1", message_id="m1", delta=f"b{i}")
    resumed.record(ev.TextEnd, "r1", message_id="m1")
    await resumed.commit()
    assert await opener().read(SID) == list(resumed.view())
    assert [e.seq for e in resumed.view()] == list(range(len(resumed)))


@pytest.mark.anyio
async def test_a_tail_that_starts_inside_a_run_starts_at_its_seq(
    opener: Callable[[], SessionStore],
) -> None:
    store = opener()
    await store.create(record())
    one: dict[str, Any] = {"session_id": SID, "run_id": "r1", "ts": 7}
    two = {**one, "run_id": "r2"}
    log: list[ev.LoopEvent] = [ev.RunStarted(seq=0, model="m", **one)]
    log += [ev.TextDelta(seq=1 + i, message_id="m", delta=str(i), **one) for i in range(6)]
    log += [
        ev.RunFinished(seq=7, stop_reason="end_turn", **one),
        ev.RunStarted(seq=8, model="m", **two),
        ev.Compaction(seq=9, summary="s", through_seq=3, **two),
        ev.RunFinished(seq=10, stop_reason="end_turn", **two),
    ]
    await store.append(SID, log)  # the deltas 1..6 are one run; the tail starts at 4
    assert await read_tail(opener(), SID) == log[4:]
    entries = await read_tail_entries(opener(), SID)  # runs kept folded: the same events
    assert expanded(entries) == log[4:]
    assert list(SessionLog(SID, entries, store=store).view()) == log[4:]


@pytest.mark.anyio
async def test_a_session_loaded_with_its_runs_folded_reads_and_continues_exactly(
    opener: Callable[[], SessionStore],
) -> None:
    agent = agent_on(opener())
    session = await agent.new_session("/w")
    for i in range(3):
        await session.prompt(prompt(f"question {i}"))
    logged = list(session.log.view())
    assert len(session.log.view().entries()) < len(logged)  # the turns' deltas: one run each
    await agent.close_session(session.id)
    reloaded = await agent_on(opener()).load_session(session.id)
    assert list(reloaded.log.view()) == logged
    assert reloaded.log.history.messages() == SessionLog(session.id, logged).history.messages()
    await reloaded.prompt(prompt("one more"))
    assert await opener().read(session.id) == list(reloaded.log.view())


# -- older rows, SQLite ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_older_one_row_per_delta_logs_still_load_beside_runs(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    store = SqliteStore(db)
    await store.create(record())
    old = turn(0, "m1", 5)
    for event in old:  # one row per event, as a format-4 build stored them
        await store.append(SID, [event])
    new = turn(len(old), "m2", 8)
    await store.append(SID, new)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET format = 4 WHERE seq < ?", (len(old),))
        unstamped = event_to_json(old[2])  # the first builds: no stamp, the full JSON
        conn.execute("UPDATE events SET format = NULL, data = ? WHERE seq = 2", (unstamped,))
        kinds = conn.execute("SELECT format, count(*) FROM events GROUP BY format").fetchall()
    assert sorted(kinds, key=str) == sorted([(None, 1), (4, 6), (5, 3)], key=str)
    again = SqliteStore(db)
    assert await again.read(SID) == old + new
    assert await again.read(SID, after_seq=9) == (old + new)[10:]
    report = check_store(db)
    assert report.ok and report.events == len(old + new)
    salvaged = list(salvage_events(db, SID))
    assert [s.event for s in salvaged] == old + new
    again.close()


@pytest.mark.anyio
async def test_a_run_row_from_a_newer_build_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    store = SqliteStore(db)
    await store.create(record())
    await store.append(SID, turn(0, "m1", 5))
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE events SET format = ? WHERE kind = 'text_delta'", (formats.FORMAT + 1,)
        )
    with pytest.raises(StoreError) as err:
        await SqliteStore(db).read(SID)
    assert err.value.code == "format_too_new" and "seq 5" in err.value.message
    assert "upgrade steerable-bridge" in err.value.message
    store.close()


# -- the first request after a reload --------------------------------------------------------


def agent_on(store: SessionStore) -> Agent:
    router = ModelRouter()
    provider = ScriptedProvider(
        Script(rounds=[Round(text="a fine answer", chunk_size=2)], loop=True)
    )
    router.register("scripted", lambda name: provider)
    return Agent(router=router, store=store, config=AgentConfig(model="scripted:test"))


def prompt(text: str) -> TurnInput:
    return TurnInput(content=(TextPart(text=text),))


@pytest.mark.anyio
async def test_the_first_request_after_a_reload_is_stored_by_reference(
    opener: Callable[[], SessionStore],
) -> None:
    agent = agent_on(opener())
    session = await agent.new_session("/w")
    for i in range(3):
        await session.prompt(prompt(f"question {i} " + "x" * 2000))
    await agent.close_session(session.id)
    reloaded = await agent_on(opener()).load_session(session.id)  # another process
    await reloaded.prompt(prompt("one more"))
    logged = list(reloaded.log.view())
    requests = [e for e in logged if isinstance(e, ev.ModelRequestEvent)]
    assert len(requests) == 4 and len(requests[-1].request.messages) == 7
    rows = await stored_requests(opener, session.id)
    assert all(is_reference(row) for row in rows)
    sizes = [len(row[5]) for row in rows]
    assert max(sizes) < 1000  # the 6 KB of earlier questions are referred to, not written
    assert all('["from",' in str(row[5]) for row in rows[1:])  # and the answers streamed
    assert "a fine answer" not in str(rows[-1][5])
    reader = opener()
    assert await reader.read(session.id) == logged
    for after in range(-1, len(logged)):  # a read from anywhere fetches what it refers to
        assert await reader.read(session.id, after_seq=after) == logged[after + 1 :]


@pytest.mark.anyio
async def test_sessions_let_go_leave_no_request_writer_and_reload_by_reference(
    opener: Callable[[], SessionStore],
) -> None:
    store: Any = opener()
    agent = agent_on(store)
    for burst in range(3):  # bursts of sessions whose clients left: nothing piles up
        ids = []
        for i in range(4):
            session = await agent.new_session("/w")
            await session.prompt(prompt(f"question {burst}.{i} " + "x" * 2000))
            ids.append(session.id)
        assert store.writers_in_memory == 4
        for sid in ids:
            await agent.close_session(sid)
        assert store.writers_in_memory == 0 and agent.sessions_in_memory == 0
    again = await agent.load_session(ids[0])  # this process, this store: resumed from the read
    await again.prompt(prompt("one more"))
    assert store.writers_in_memory == 1
    rows = await stored_requests(opener, ids[0])
    assert len(rows) == 2 and is_reference(rows[1]) and len(rows[1][5]) < 1000


async def stored_requests(opener: Callable[[], SessionStore], sid: str) -> list[Row]:
    store: Any = opener()
    sql = (
        "SELECT seq, format, kind, run_id, ts, data FROM events"
        " WHERE session_id = {} AND kind = 'model_request' ORDER BY seq"
    )
    if isinstance(store, SqliteStore):
        return store.call(lambda conn: conn.execute(sql.format("?"), (sid,)).fetchall())
    async with store._conn() as conn:
        cur = await conn.execute(sql.format("%s"), (sid,))
        return list(await cur.fetchall())
