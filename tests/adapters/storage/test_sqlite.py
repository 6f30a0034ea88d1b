"""The SQLite store beyond the common contract: format versions, damage, ownership, resume."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage import formats
from steerable_bridge.adapters.storage.integrity import check_store, salvage_events
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.agent_sessions.signals import SessionSignal
from steerable_bridge.runtime.encoding.codec import event_to_json
from steerable_bridge.runtime.ports.storage import (
    SessionBusy,
    SessionOwned,
    SessionRecord,
    StoreError,
)
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.adapters.storage.logs import long_session

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.db"


@pytest.fixture
def stores(db: Path) -> Iterator[list[SqliteStore]]:
    opened: list[SqliteStore] = []
    yield opened
    for store in opened:
        store.close()


def open_store(db: Path, stores: list[SqliteStore]) -> SqliteStore:
    store = SqliteStore(db)
    stores.append(store)
    return store


def agent_on(store: SqliteStore, rounds: list[Round]) -> Agent:
    router = ModelRouter()
    provider = ScriptedProvider(Script(rounds=rounds, loop=True))
    router.register("scripted", lambda name: provider)
    return Agent(router=router, store=store, config=AgentConfig(model="scripted:test"))


def prompt(text: str) -> TurnInput:
    return TurnInput(content=(TextPart(text=text),))


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def execute(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def write_garbage(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not sqlite at all " * 200)


async def seeded(db: Path, stores: list[SqliteStore], sid: str = "s1", n: int = 3) -> None:
    store = open_store(db, stores)
    await store.create(SessionRecord(session_id=sid, cwd="/w", created_at=1, updated_at=1))
    for i in range(n):  # one batch each: one row each (a batch's deltas share a row)
        base = {"session_id": sid, "run_id": "r", "message_id": "m"}
        await store.append(sid, [ev.TextDelta(seq=i, ts=10 + i, delta="x", **base)])


async def test_file_uses_wal_and_every_row_is_format_stamped(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores)
    assert rows(db, "PRAGMA journal_mode") == [("wal",)]
    assert rows(db, "SELECT DISTINCT format FROM events") == [(formats.FORMAT,)]
    assert rows(db, "SELECT format FROM sessions") == [(formats.FORMAT,)]
    data = json.loads(str(rows(db, "SELECT data FROM events WHERE seq = 1")[0][0]))
    assert data == {"message_id": "m", "delta": "x"}  # the envelope is in the columns
    assert rows(db, "SELECT kind, run_id, ts FROM events WHERE seq = 1") == [
        ("text_delta", "r", 11)
    ]


async def test_unstamped_rows_are_upgraded_in_memory_not_rewritten(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores)
    first = open_store(db, stores)
    old = (await first.read("s1"))[1]
    execute(db, "UPDATE events SET format = NULL, data = ? WHERE seq = 1", event_to_json(old))
    execute(db, "UPDATE sessions SET format = NULL")
    fresh = open_store(db, stores)
    assert await fresh.read("s1") == await first.read("s1")
    assert [e.seq for e in await fresh.read("s1")] == [0, 1, 2]
    assert (await fresh.get("s1")) is not None
    assert rows(db, "SELECT format FROM events WHERE seq = 1") == [(None,)]


async def test_older_formats_go_through_the_upgrade_chain(
    db: Path, stores: list[SqliteStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    await seeded(db, stores)

    def next_format(data: formats.JsonObject) -> formats.JsonObject:
        if data.get("kind") == "text_delta":
            data["delta"] = data["delta"].upper()
        return data

    written = formats.FORMAT  # a later build reads these rows through one more upgrade
    monkeypatch.setattr(formats, "FORMAT", written + 1)
    monkeypatch.setitem(formats.UPGRADES, written, next_format)
    events = await open_store(db, stores).read("s1")
    assert [e.delta for e in events if isinstance(e, ev.TextDelta)] == ["X", "X", "X"]


KEPT = "session_id, cwd, title, model, created_at, updated_at, last_seq, user_id"
"""The session columns a refused append must leave as they were."""


async def test_a_row_from_a_newer_build_is_refused_and_nothing_changes(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores)
    execute(db, "UPDATE events SET format = 99 WHERE seq = 2")
    before = rows(db, "SELECT seq, format, data FROM events ORDER BY seq")
    record_before = rows(db, f"SELECT {KEPT} FROM sessions")
    store = open_store(db, stores)
    with pytest.raises(StoreError) as err:
        await store.read("s1")
    assert err.value.code == "format_too_new"
    assert "upgrade steerable-bridge" in err.value.message and "seq 2" in err.value.message
    agent = agent_on(store, [Round(text="hi")])
    with pytest.raises(StoreError) as loading:
        await agent.load_session("s1")
    assert loading.value.code == "format_too_new"
    execute(db, "UPDATE sessions SET format = 99")
    with pytest.raises(StoreError) as appending:
        await store.append(
            "s1",
            [ev.TextDelta(session_id="s1", run_id="r", seq=3, ts=1, message_id="m", delta="y")],
        )
    assert appending.value.code == "format_too_new"
    assert rows(db, "SELECT seq, format, data FROM events ORDER BY seq") == before
    assert rows(db, f"SELECT {KEPT} FROM sessions") == record_before
    assert not check_store(db).ok


async def test_an_undecodable_row_is_an_error_naming_it_never_skipped(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores, n=5)
    execute(db, 'UPDATE events SET data = \'{"kind": "text_delta", broken\' WHERE seq = 3')
    store = open_store(db, stores)
    with pytest.raises(StoreError) as err:
        await store.read("s1")
    assert err.value.code == "corrupt_record"
    assert "seq 3 of session s1" in err.value.message and "sessions export" in err.value.message
    report = check_store(db)
    assert not report.ok and any("seq 3" in p for p in report.problems)
    salvaged = list(salvage_events(db, "s1"))
    assert [s.seq for s in salvaged if s.event is not None] == [0, 1, 2, 4]
    assert [s.seq for s in salvaged if s.problem is not None] == [3]


def test_opening_waits_for_another_process_opening_the_same_new_file(
    db: Path, stores: list[SqliteStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another opener holds the brand-new file (as a second agent started at the same moment
    # does): SQLite refuses the switch to WAL at once instead of waiting, so the store must
    # retry it. The holder lets go as soon as the store has had to wait once.
    from steerable_bridge.adapters.storage import sqlite as sqlite_module

    db.parent.mkdir(parents=True)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE held (x)")
    real_sleep = sqlite_module.time.sleep

    def sleep_then_release(seconds: float) -> None:
        if holder.in_transaction:
            holder.execute("COMMIT")
        real_sleep(seconds)

    monkeypatch.setattr(sqlite_module.time, "sleep", sleep_then_release)
    store = SqliteStore(db)
    stores.append(store)
    try:
        mode = store.call(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        holder.close()
    assert mode == "wal"


async def test_a_file_that_is_not_a_database_gives_a_clear_error(
    db: Path, stores: list[SqliteStore]
) -> None:
    write_garbage(db)
    store = open_store(db, stores)
    with pytest.raises(StoreError) as err:
        await store.list()
    assert err.value.code == "store_corrupt"
    assert "sessions check" in err.value.message and str(db) in err.value.message
    report = check_store(db)
    assert not report.ok and "not a database" in report.problems[0]


async def test_a_store_from_a_newer_schema_is_refused(db: Path, stores: list[SqliteStore]) -> None:
    await seeded(db, stores)
    execute(db, "PRAGMA user_version = 42")
    with pytest.raises(StoreError) as err:
        await open_store(db, stores).list()
    assert err.value.code == "store_too_new" and "upgrade steerable-bridge" in err.value.message


async def test_a_turn_survives_a_restart_event_for_event(
    db: Path, stores: list[SqliteStore]
) -> None:
    agent = agent_on(open_store(db, stores), [Round(text="hello there", chunk_size=3)])
    session = await agent.new_session("/w")
    outcome = await session.prompt(prompt("hi"))
    assert outcome.stop_reason == "end_turn"
    logged = list(session.log.view())
    again = agent_on(open_store(db, stores), [Round(text="more")])
    loaded = await again.load_session(session.id)
    assert list(loaded.log.view()) == logged
    listed = await again.list_sessions()
    assert [(r.session_id, r.title) for r in listed.records] == [(session.id, "hi")]


async def test_an_open_run_is_closed_on_load_once_by_appending(
    db: Path, stores: list[SqliteStore]
) -> None:
    store = open_store(db, stores)
    await store.create(SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1))
    base = {"session_id": "s1", "run_id": "r1", "ts": 5}
    crashed: list[ev.LoopEvent] = [
        ev.RunStarted(seq=0, model="m", **base),  # type: ignore[arg-type]
        ev.StepStarted(seq=1, step=1, **base),  # type: ignore[arg-type]
        ev.TextStart(seq=2, message_id="m1", **base),  # type: ignore[arg-type]
        ev.TextDelta(seq=3, message_id="m1", delta="half", **base),  # type: ignore[arg-type]
        ev.ToolCallStart(seq=4, call_id="c1", name="calc", parent_message_id="m1", **base),  # type: ignore[arg-type]
    ]
    await store.append("s1", crashed)
    session = await agent_on(open_store(db, stores), [Round(text="ok")]).load_session("s1")
    tail = list(session.log.view())[len(crashed) :]
    assert [e.kind for e in tail] == [
        "text_end",
        "tool_call_end",
        "tool_finished",
        "step_finished",
        "run_failed",
    ]
    assert isinstance(tail[-1], ev.RunFailed) and tail[-1].code == "interrupted"
    stored = await open_store(db, stores).read("s1")
    assert stored[: len(crashed)] == crashed and stored[len(crashed) :] == tail
    reloaded = await agent_on(open_store(db, stores), [Round(text="ok")]).load_session("s1")
    assert len(reloaded.log) == len(stored)
    assert (await reloaded.prompt(prompt("go on"))).stop_reason == "end_turn"


async def test_a_summary_a_crash_left_half_written_is_dropped_on_load(
    db: Path, stores: list[SqliteStore]
) -> None:
    store = open_store(db, stores)
    await store.create(SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1))
    base = {"session_id": "s1", "run_id": "r1", "ts": 5}
    crashed: list[ev.LoopEvent] = [
        ev.RunStarted(seq=0, model="m", **base),  # type: ignore[arg-type]
        ev.UserMessage(seq=1, message_id="u1", content=(TextPart(text="hi"),), **base),  # type: ignore[arg-type]
        ev.CompactionStarted(seq=2, compaction_id="k1", trigger="manual", **base),  # type: ignore[arg-type]
        ev.CompactionSummaryDelta(seq=3, compaction_id="k1", delta="The us", **base),  # type: ignore[arg-type]
        ev.CompactionSummaryDelta(seq=4, compaction_id="k1", delta="er said", **base),  # type: ignore[arg-type]
    ]
    await store.append("s1", crashed)
    session = await agent_on(open_store(db, stores), [Round(text="ok")]).load_session("s1")
    tail = list(session.log.view())[len(crashed) :]
    assert [e.kind for e in tail] == ["compaction_dropped", "run_failed"]
    assert isinstance(tail[0], ev.CompactionDropped)
    assert (tail[0].compaction_id, tail[0].reason) == ("k1", "failed")
    assert [m.text for m in session.log.history.messages()] == ["hi"]  # no half summary
    stored = await open_store(db, stores).read("s1")
    assert stored[: len(crashed)] == crashed  # the pieces read back exactly (one run row)
    assert (await session.prompt(prompt("go on"))).stop_reason == "end_turn"


async def test_another_owner_blocks_prompt_and_recovery_but_not_loading(
    db: Path, stores: list[SqliteStore]
) -> None:
    first = agent_on(open_store(db, stores), [Round(text="ok")])
    session = await first.new_session("/w")
    await session.record(ev.ModeChanged, mode_id="read-only")
    owner = open_store(db, stores)  # stands in for a second process holding the turn
    async with owner.claim(session.id):
        await owner.append(
            session.id,
            [ev.RunStarted(session_id=session.id, run_id="live", seq=1, ts=9, model="m")],
        )
        other = agent_on(open_store(db, stores), [Round(text="ok")])
        loaded = await other.load_session(session.id)
        assert loaded.facts.running and len(loaded.log) == 2  # nothing appended
        with pytest.raises(SessionOwned) as err:
            await loaded.prompt(prompt("hi"))
        assert err.value.code == "session_owned" and f"process {os.getpid()}" in err.value.message
        assert isinstance(err.value, SessionBusy)  # transports handling busy handle this too
        assert owner.owner(session.id) is not None
    assert owner.owner(session.id) is None
    outcome = await loaded.prompt(prompt("hi"))  # the owner is gone: close its run, go on
    assert outcome.stop_reason == "end_turn"
    kinds = [e.kind for e in loaded.log.view()]
    assert kinds[:4] == ["mode_changed", "run_started", "run_failed", "run_started"]


async def test_two_agents_take_turns_on_one_session_without_seq_conflicts(
    db: Path, stores: list[SqliteStore]
) -> None:
    a = agent_on(open_store(db, stores), [Round(text="from a")])
    b = agent_on(open_store(db, stores), [Round(text="from b")])
    session_a = await a.new_session("/w")
    session_b = await b.load_session(session_a.id)
    for _ in range(2):
        assert (await session_a.prompt(prompt("to a"))).stop_reason == "end_turn"
        assert (await session_b.prompt(prompt("to b"))).stop_reason == "end_turn"
    stored = await open_store(db, stores).read(session_a.id)
    assert [e.seq for e in stored] == list(range(len(stored)))
    assert list(session_b.log.view()) == stored
    users = [e.content[0].text for e in stored if isinstance(e, ev.UserMessage)]  # type: ignore[union-attr]
    assert users == ["to a", "to b", "to a", "to b"]


async def test_delete_is_refused_while_another_owner_runs_a_turn(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores)
    owner, other = open_store(db, stores), open_store(db, stores)
    async with owner.claim("s1"):
        with pytest.raises(SessionOwned):
            await other.delete("s1")
    assert await other.delete("s1") is True
    assert not list(db.with_name(db.name + "-owners").glob("*.lock"))


async def test_concurrent_session_records_in_one_process_wait_for_each_other(
    db: Path, stores: list[SqliteStore]
) -> None:
    agent = agent_on(open_store(db, stores), [Round(text="ok")])
    session = await agent.new_session("/w")
    async with anyio.create_task_group() as tg:
        for mode in ("a", "b", "c"):
            tg.start_soon(lambda m=mode: session.record(ev.ModeChanged, mode_id=m))
        tg.start_soon(session.prompt, prompt("hi"))
    stored = await open_store(db, stores).read(session.id)
    assert [e.seq for e in stored] == list(range(len(stored)))
    assert sorted(e.mode_id for e in stored if isinstance(e, ev.ModeChanged)) == ["a", "b", "c"]
    assert sum(isinstance(e, ev.RunFinished) for e in stored) == 1


async def test_resume_reads_only_the_tail_after_a_compaction_and_continues_its_seq(
    db: Path, stores: list[SqliteStore]
) -> None:
    store = open_store(db, stores)
    await store.create(SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1))
    full = long_session("s1")
    await store.append("s1", full)
    session = await agent_on(open_store(db, stores), [Round(text="ok")]).load_session("s1")
    assert len(session.log) < 20 < len(full)
    assert session.mode == "read-only" and session.facts.title == "Hello"
    assert session.facts.always == {"write": True} and session.facts.state == {"n": 2}
    assert (await session.prompt(prompt("next"))).stop_reason == "end_turn"
    stored = await open_store(db, stores).read("s1")
    assert [e.seq for e in stored] == list(range(len(stored)))
    assert stored[: len(full)] == full


async def test_steer_and_cancel_reach_a_turn_another_process_runs(
    db: Path, stores: list[SqliteStore]
) -> None:
    runner = agent_on(open_store(db, stores), [Round(text="working", hang=True)])
    remote = agent_on(open_store(db, stores), [Round(text="unused")])
    session = await runner.new_session("/w")
    started = anyio.Event()

    async def streaming(event: ev.LoopEvent) -> None:
        """The model is streaming: a steer now waits for the next step boundary (sent any
        earlier, the first step would take it at once, leaving nothing queued to observe)."""
        if isinstance(event, ev.TextDelta):
            started.set()

    outcome: list[str] = []

    async def run() -> None:
        result = await session.prompt(prompt("go"), streaming)
        outcome.append(result.stop_reason)

    async with anyio.create_task_group() as tg:
        await tg.start(runner.relay_signals)
        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
            assert await remote.owner_elsewhere(session.id) is not None
            assert await remote.steer(session.id, (TextPart(text="also this"),)) is True
            while not len(session.steering):  # noqa: ASYNC110 - the signal's arrival
                await anyio.sleep(0.005)
            assert await remote.cancel(session.id, "stopped from another worker") is True
            while not outcome:  # noqa: ASYNC110 - the turn's end
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    assert await remote.cancel(session.id) is False


async def test_the_signal_poll_parks_without_a_claim_and_resumes_at_the_newest_signal(
    db: Path, stores: list[SqliteStore]
) -> None:
    """No claim here: the poll parks and what is published meanwhile is skipped (no turn
    here could use it); a signal published the moment a claim is entered arrives."""
    listener, other = open_store(db, stores), open_store(db, stores)
    got: list[SessionSignal] = []
    arrived = anyio.Event()

    def deliver(signal: SessionSignal) -> None:
        got.append(signal)
        arrived.set()

    early = SessionSignal(session_id="s1", action="cancel", reason="for a turn long gone")
    late = SessionSignal(session_id="s1", action="cancel", reason="for this turn")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(listener.listen, deliver)
            await until_parked(listener, 1)
            await other.publish(early)
            async with listener.claim("s1"):
                assert listener._demand.parked == 0  # polling while the claim is held
                await other.publish(late)
                await arrived.wait()
            await until_parked(listener, 1)  # the claim left: parked again
            tg.cancel_scope.cancel()
    assert got == [late]


async def until_parked(store: SqliteStore, count: int) -> None:
    while store._demand.parked != count:  # noqa: ASYNC110 - the poll reaching its wait
        await anyio.sleep(0.005)


async def test_shedding_idle_connections_closes_them_and_the_store_keeps_working(
    db: Path, stores: list[SqliteStore]
) -> None:
    await seeded(db, stores, n=2)
    store = stores[0]
    assert [e.seq for e in await store.read("s1")] == [0, 1]  # a reader opened too
    assert await anyio.to_thread.run_sync(store.shed_idle) == 2  # the writer and a reader
    assert store.shed_idle() == 0  # nothing left open
    base = {"session_id": "s1", "run_id": "r", "message_id": "m"}
    await store.append("s1", [ev.TextDelta(seq=2, ts=12, delta="y", **base)])
    assert [e.seq for e in await store.read("s1")] == [0, 1, 2]


async def test_a_connection_in_use_is_not_shed(db: Path, stores: list[SqliteStore]) -> None:
    await seeded(db, stores, n=1)
    store = stores[0]

    def shed_while_writing(conn: sqlite3.Connection) -> tuple[int, int]:
        shed = store.shed_idle()  # the writer is this call's: kept open
        return shed, int(conn.execute("SELECT count(*) FROM events").fetchone()[0])

    assert await anyio.to_thread.run_sync(store.call, shed_while_writing) == (0, 1)
    base = {"session_id": "s1", "run_id": "r", "message_id": "m"}
    await store.append("s1", [ev.TextDelta(seq=1, ts=11, delta="y", **base)])
    assert rows(db, "SELECT count(*) FROM events") == [(2,)]
