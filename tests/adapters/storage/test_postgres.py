"""The PostgreSQL store beyond the common contract, against a real server (tests/pg.py):
ownership between processes, format and schema versions, signals, check, and --storage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import anyio
import psycopg
import pytest

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage.formats import FORMAT, encode_record
from steerable_bridge.adapters.storage.postgres import PostgresStore, redact
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.storage_choice import build_store
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.agent_sessions.signals import SessionSignal
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionOwned,
    SessionRecord,
    StoreError,
    read_tail,
)
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.adapters.storage.logs import long_session

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
async def opened(pg_url: str) -> AsyncIterator[Callable[[str], PostgresStore]]:
    """Open stores on the test database; each stands in for one process."""
    stores: list[PostgresStore] = []

    def open_store(name: str = "test") -> PostgresStore:
        store = PostgresStore(pg_url, app=f"steerable-bridge {name}")
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        await store.aclose()


def record(sid: str) -> SessionRecord:
    return SessionRecord(session_id=sid, cwd="/w", created_at=1, updated_at=1)


def text(sid: str, seq: int) -> ev.TextDelta:
    return ev.TextDelta(session_id=sid, run_id="r", seq=seq, ts=10 + seq, message_id="m", delta="x")


def agent_on(store: PostgresStore, rounds: list[Round]) -> Agent:
    router = ModelRouter()
    provider = ScriptedProvider(Script(rounds=rounds, loop=True))
    router.register("scripted", lambda name: provider)
    return Agent(router=router, store=store, config=AgentConfig(model="scripted:test"))


def execute(url: str, sql: str, *params: object) -> None:
    with psycopg.connect(url, autocommit=True, options="-c search_path=steerable") as conn:
        conn.execute(sql, params)  # type: ignore[arg-type]


async def test_ownership_is_exclusive_across_processes_and_names_the_owner(
    opened: Callable[[str], PostgresStore],
) -> None:
    one, two = opened("one"), opened("two")
    await one.create(record("s1"))
    async with one.claim("s1"):
        with pytest.raises(SessionOwned) as err:
            async with two.claim("s1"):
                pass
        assert "steerable-bridge one" in err.value.message
        assert await two.owner("s1") is not None
        with pytest.raises(SessionOwned):
            await two.delete("s1")
        with pytest.raises(SessionOwned):  # one process never claims a session twice
            async with one.claim("s1"):
                pass
    assert await two.owner("s1") is None
    async with two.claim("s1"):
        pass
    assert await two.delete("s1") is True


async def test_a_dead_owners_lock_is_released_by_the_server(
    opened: Callable[[str], PostgresStore],
) -> None:
    one, two = opened("one"), opened("two")
    await one.create(record("s1"))
    claim = one.claim("s1")
    await claim.__aenter__()
    with pytest.raises(SessionOwned):
        async with two.claim("s1"):
            pass
    await one.aclose()  # its connections close as when the process dies
    with anyio.fail_after(10):
        while await two.owner("s1") is not None:  # noqa: ASYNC110 - the backend ends soon
            await anyio.sleep(0.01)
    async with two.claim("s1"):
        pass


async def test_rows_from_a_newer_format_or_schema_are_refused(
    opened: Callable[[str], PostgresStore], pg_url: str
) -> None:
    store = opened("one")
    await store.create(record("s1"))
    await store.append("s1", [text("s1", 0), text("s1", 1)])
    execute(pg_url, "UPDATE events SET format = 99 WHERE seq = 1")
    with pytest.raises(StoreError) as err:
        await store.read("s1")
    assert err.value.code == "format_too_new" and "upgrade" in err.value.message
    report = await store.check()
    assert not report.ok and "format 99" in report.problems[0]
    execute(pg_url, "UPDATE meta SET value = 99 WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as newer:
        await opened("two").get("s1")
    assert newer.value.code == "store_unavailable" or newer.value.code == "store_too_new"
    assert "newer steerable-bridge" in newer.value.message


async def test_check_is_clean_for_a_good_store_and_finds_a_damaged_row(
    opened: Callable[[str], PostgresStore], pg_url: str
) -> None:
    store = opened("one")
    await store.create(record("s1"))
    await store.append("s1", long_session("s1"))
    report = await store.check()
    assert report.ok and report.sessions == 1 and report.events == len(long_session("s1"))
    execute(pg_url, "UPDATE events SET data = '{not json' WHERE seq = 3")
    damaged = await store.check()
    assert any("seq 3" in problem for problem in damaged.problems)


async def test_a_large_batch_goes_through_copy_and_reads_back(
    opened: Callable[[str], PostgresStore],
) -> None:
    store = opened("one")
    await store.create(record("s1"))
    await store.append("s1", [text("s1", i) for i in range(500)])
    await store.append("s1", [text("s1", 500)])
    assert [e.seq for e in await store.read("s1", after_seq=495)] == list(range(496, 501))


async def test_an_append_is_one_statement_that_keeps_every_column_and_the_record(
    opened: Callable[[str], PostgresStore], pg_url: str
) -> None:
    """Run ids and deltas holding the characters the packed parameters split on, a title
    set mid-batch: read back exactly, and the session row's JSON is what encode_record
    writes for the updated record."""
    store = opened("one")
    await store.create(SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1))
    odd = "run,1\x1e\x1f\u00e9"
    batch: list[ev.LoopEvent] = [
        ev.TextDelta(session_id="s1", run_id=odd, seq=0, ts=5, message_id="m", delta="a\x1eb,c"),
        ev.SessionInfo(session_id="s1", run_id="", seq=1, ts=6, title="Trip, planned"),
        ev.TextDelta(session_id="s1", run_id=odd, seq=2, ts=7, message_id="m", delta="\u00e9"),
    ]
    await store.append("s1", batch)
    await store.append("s1", [text("s1", 3)])
    assert await store.read("s1") == [*batch, text("s1", 3)]
    expected = SessionRecord(
        session_id="s1", cwd="/w", created_at=1, updated_at=13, title="Trip, planned"
    )
    assert await store.get("s1") == expected
    with psycopg.connect(pg_url, options="-c search_path=steerable") as conn:
        row = conn.execute("SELECT data, format, last_seq, title FROM sessions").fetchone()
        kinds = conn.execute("SELECT kind, run_id, facts FROM events ORDER BY seq").fetchall()
    assert row is not None
    assert json.loads(row[0]) == json.loads(encode_record(expected))
    assert row[1:] == (FORMAT, 3, "Trip, planned")
    assert kinds == [("text_delta", odd, 0), ("session_info", "", 1), ("text_delta", odd, 0),
                     ("text_delta", "r", 0)]  # fmt: skip


async def test_concurrent_appends_to_one_session_never_interleave_or_duplicate(
    opened: Callable[[str], PostgresStore],
) -> None:
    """Two processes race to append the same seqs: each batch is written whole or refused
    with seq_conflict, and the log holds exactly the batches that were accepted."""
    one, two = opened("one"), opened("two")
    await one.create(record("s1"))
    accepted: list[list[int]] = []
    refused: list[str] = []

    async def write(store: PostgresStore, first: int, size: int) -> None:
        seqs = list(range(first, first + size))
        try:
            await store.append("s1", [text("s1", seq) for seq in seqs])
        except StoreError as err:
            refused.append(err.code)
        else:
            accepted.append(seqs)

    async with anyio.create_task_group() as tg:
        for first in range(0, 200, 10):
            tg.start_soon(write, one, first, 20)
            tg.start_soon(write, two, first + 5, 20)
    stored = [e.seq for e in await one.read("s1")]
    assert sorted(seq for seqs in accepted for seq in seqs) == stored
    assert stored == sorted(set(stored)) and refused and set(refused) == {"seq_conflict"}


async def test_an_append_to_a_session_from_a_newer_build_is_refused(
    opened: Callable[[str], PostgresStore], pg_url: str
) -> None:
    store = opened("one")
    await store.create(record("s1"))
    execute(pg_url, "UPDATE sessions SET format = 99")
    for batch in ([text("s1", 0)], []):
        with pytest.raises(StoreError) as err:
            await store.append("s1", batch)
        assert err.value.code == "format_too_new"
    with pytest.raises(SessionNotFound):
        await store.append("nope", [])


async def test_reads_work_without_pipeline_mode(
    opened: Callable[[str], PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A libpq older than 14 has no pipeline mode: the same queries run one by one."""
    store = opened("one")
    await store.create(record("s1"))
    log = long_session("s1")
    await store.append("s1", log)
    piped = (await store.read("s1", after_seq=3), await read_tail(store, "s1"))
    monkeypatch.setattr(psycopg.AsyncPipeline, "is_supported", classmethod(lambda cls: False))
    assert (await store.read("s1", after_seq=3), await read_tail(store, "s1")) == piped
    assert piped[0] == log[4:] and len(piped[1]) < len(log)
    with pytest.raises(SessionNotFound):
        await read_tail(store, "nope")


async def test_signals_reach_a_listening_process_inline_and_through_the_table(
    opened: Callable[[str], PostgresStore],
) -> None:
    listener, sender = opened("one"), opened("two")
    got: list[SessionSignal] = []
    arrived = anyio.Event()

    def deliver(signal: SessionSignal) -> None:
        got.append(signal)
        if len(got) == 2:
            arrived.set()

    small = SessionSignal(session_id="s1", action="cancel", reason="stop it")
    large = SessionSignal(session_id="s1", action="steer", content=(TextPart(text="x" * 20000),))
    async with anyio.create_task_group() as tg:
        await tg.start(listener.listen, deliver)
        await sender.publish(small)
        await sender.publish(large)
        with anyio.fail_after(10):
            await arrived.wait()
        tg.cancel_scope.cancel()
    assert got == [small, large]


async def test_steer_and_cancel_reach_a_turn_another_process_runs(
    opened: Callable[[str], PostgresStore],
) -> None:
    runner = agent_on(opened("one"), [Round(text="working", hang=True)])
    remote = agent_on(opened("two"), [Round(text="unused")])
    session = await runner.new_session("/w")
    started = anyio.Event()

    async def streaming(event: ev.LoopEvent) -> None:
        """The model is streaming: a steer now waits for the next step boundary (sent any
        earlier, the first step would take it at once, leaving nothing queued to observe)."""
        if isinstance(event, ev.TextDelta):
            started.set()

    async with anyio.create_task_group() as tg:
        await tg.start(runner.relay_signals)
        outcome: list[str] = []

        async def run() -> None:
            result = await session.prompt(TurnInput(content=(TextPart(text="go"),)), streaming)
            outcome.append(result.stop_reason)

        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
            assert await remote.owner_elsewhere(session.id) is not None
            assert await remote.steer(session.id, (TextPart(text="also this"),)) is True
            while not len(session.steering):  # noqa: ASYNC110 - the signal's arrival
                await anyio.sleep(0.005)
            assert await remote.cancel(session.id, "stopped from another server") is True
        with anyio.fail_after(10):
            while not outcome:  # noqa: ASYNC110 - the turn's end
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    assert await remote.cancel(session.id) is False  # nothing runs any more


def test_storage_urls_choose_postgresql() -> None:
    url = "postgresql://me:secret@db:5432/x"
    assert isinstance(build_store(url), PostgresStore)  # opens nothing until first used
    assert isinstance(build_store(url.replace("postgresql://", "postgres://")), PostgresStore)
    assert redact(url) == "postgresql://me:***@db:5432/x"


@pytest.mark.parametrize("spec", ["mysql://u:p@db/x", "sqlite://x.db", "HTTPS://host/db"])
def test_storage_urls_with_other_schemes_are_refused_by_name(spec: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_store(spec)
    scheme = spec.split("://")[0].lower()
    assert f"{scheme}://" in str(err.value) and "postgresql://" in str(err.value)


async def test_an_unreachable_server_is_a_store_error_naming_the_url() -> None:
    # the pool retries a refused connection until its timeout: a short one ends the test sooner
    store = PostgresStore("postgresql://me:secret@127.0.0.1:1/x", timeout_s=0.3)
    with pytest.raises(StoreError) as err:
        await store.get("s1")
    assert err.value.code == "store_unavailable"
    assert "127.0.0.1:1" in err.value.message and "secret" not in err.value.message
