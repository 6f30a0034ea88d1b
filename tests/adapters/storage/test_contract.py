"""The SessionStore contract, checked against every store: memory, SQLite and PostgreSQL (a
real server the tests start, see tests/pg.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import project_history, session_facts
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionOwned,
    SessionRecord,
    SessionStore,
    StoreError,
    read_tail,
)
from steerable_bridge.runtime.values import TextPart
from tests.adapters.storage.logs import long_session

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "postgresql":
        from steerable_bridge.adapters.storage.postgres import PostgresStore

        postgres = PostgresStore(request.getfixturevalue("pg_url"))
        yield postgres
        await postgres.aclose()
        return
    sqlite = SqliteStore(tmp_path / "sessions.db")
    yield sqlite
    sqlite.close()


def record(sid: str, *, cwd: str = "/work", at: int = 1000) -> SessionRecord:
    return SessionRecord(session_id=sid, cwd=cwd, created_at=at, updated_at=at, model="demo:x")


def text(sid: str, seq: int, delta: str = "hi", *, ts: int = 2000) -> ev.TextDelta:
    return ev.TextDelta(session_id=sid, run_id="r1", seq=seq, ts=ts, message_id="m1", delta=delta)


async def test_append_then_read_in_order_with_after_seq(store: SessionStore) -> None:
    await store.create(record("s1"))
    await store.append("s1", [text("s1", 0, "a"), text("s1", 1, "b")])
    await store.append("s1", [text("s1", 5, "c")])
    assert [e.seq for e in await store.read("s1")] == [0, 1, 5]
    assert [e.seq for e in await store.read("s1", after_seq=1)] == [5]
    assert await store.read("s1") == [text("s1", 0, "a"), text("s1", 1, "b"), text("s1", 5, "c")]


async def test_duplicate_session_and_unknown_session_are_errors(store: SessionStore) -> None:
    await store.create(record("s1"))
    with pytest.raises(StoreError) as dup:
        await store.create(record("s1"))
    assert dup.value.code == "session_exists"
    with pytest.raises(SessionNotFound):
        await store.read("nope")
    with pytest.raises(SessionNotFound):
        await store.append("nope", [text("nope", 0)])
    assert await store.get("nope") is None


async def test_seq_must_rise_and_a_refused_batch_writes_nothing(store: SessionStore) -> None:
    await store.create(record("s1"))
    await store.append("s1", [text("s1", 3)])
    with pytest.raises(StoreError) as err:
        await store.append("s1", [text("s1", 4), text("s1", 3)])
    assert err.value.code == "seq_conflict"
    with pytest.raises(StoreError):
        await store.append("s1", [text("s1", 3)])
    assert [e.seq for e in await store.read("s1")] == [3]


async def test_title_and_updated_at_come_from_appended_events(store: SessionStore) -> None:
    await store.create(record("s1", at=1000))
    info = ev.SessionInfo(session_id="s1", run_id="r1", seq=0, ts=1500, title="Plan a trip")
    await store.append("s1", [info, text("s1", 1, ts=1700)])
    got = await store.get("s1")
    assert got is not None
    assert (got.title, got.updated_at, got.created_at, got.cwd) == (
        "Plan a trip",
        1700,
        1000,
        "/work",
    )
    assert got.model == "demo:x"


async def test_listing_is_newest_first_with_cursor_paging(store: SessionStore) -> None:
    for i in range(7):
        await store.create(record(f"s{i}", cwd="/a" if i % 2 else "/b", at=1000 + i))
    await store.create(record("tie", at=1003))  # same updated_at as s3: id breaks the tie
    await store.append("s0", [text("s0", 0, ts=9000)])  # s0 becomes the newest
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await store.list(limit=3, cursor=cursor)
        pages += 1
        seen += [r.session_id for r in page.records]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["s0", "s6", "s5", "s4", "tie", "s3", "s2", "s1"]
    assert pages == 3
    only_a = await store.list(cwd="/a")
    assert [r.session_id for r in only_a.records] == ["s5", "s3", "s1"]
    assert only_a.next_cursor is None
    exact = await store.list(limit=8)
    assert len(exact.records) == 8 and exact.next_cursor is None
    with pytest.raises(StoreError) as err:
        await store.list(cursor="not-a-cursor!")
    assert err.value.code == "invalid_cursor"


async def test_delete_removes_session_and_log(store: SessionStore) -> None:
    await store.create(record("s1"))
    await store.append("s1", [text("s1", 0)])
    assert await store.delete("s1") is True
    assert await store.delete("s1") is False
    assert await store.get("s1") is None
    await store.create(record("s1"))
    assert await store.read("s1") == []


async def test_tail_starts_at_the_compacting_run_and_keeps_facts(store: SessionStore) -> None:
    await store.create(record("s1"))
    full = long_session("s1")
    await store.append("s1", full)
    tail = await read_tail(store, "s1")
    assert len(tail) < 20 < len(full)
    r2 = next(e.seq for e in full if isinstance(e, ev.RunStarted) and e.run_id == "r2")
    assert [e.seq for e in tail if e.seq >= r2] == list(range(r2, len(full)))
    assert not any(isinstance(e, ev.TextDelta) and e.delta == "old " for e in tail)
    assert session_facts(tail) == session_facts(full)
    assert project_history(tail) == project_history(full)


async def test_tail_keeps_the_turns_a_compaction_kept_verbatim(store: SessionStore) -> None:
    """A compaction in run r3 that keeps r2's answer verbatim: the tail starts inside r2,
    and a later tool-result fold (scope tool_results) does not move it."""
    await store.create(record("s1"))
    full = long_session("s1")
    r2 = next(e.seq for e in full if isinstance(e, ev.Compaction)) + 1
    e = list(full)

    def add(cls: type[ev.EventBase], **fields: object) -> None:
        e.append(cls(session_id="s1", run_id="r3", seq=len(e), ts=5000 + len(e), **fields))  # type: ignore[arg-type]

    add(ev.RunStarted, model="m")
    add(ev.UserMessage, message_id="u3", content=(TextPart(text="third"),))
    add(ev.Compaction, summary="all before", through_seq=r2 - 1, trigger="pressure")
    add(ev.Compaction, summary="", through_seq=r2 + 1, trigger="micro", scope="tool_results")
    add(ev.RunFinished, stop_reason="end_turn")
    await store.append("s1", e)
    tail = await read_tail(store, "s1")
    assert [x.seq for x in tail if x.seq >= r2] == list(range(r2, len(e)))
    assert session_facts(tail) == session_facts(e)
    assert project_history(tail) == project_history(e)
    texts = [m.text for m in project_history(tail)]
    assert texts[0].endswith("all before") and texts[1:] == ["new", "third"]


async def test_tail_without_compaction_is_the_whole_log(store: SessionStore) -> None:
    await store.create(record("s1"))
    await store.append("s1", [text("s1", i) for i in range(5)])
    assert await read_tail(store, "s1") == await store.read("s1")


async def test_claim_is_exclusive_and_released_on_exit(store: SessionStore) -> None:
    await store.create(record("s1"))
    claim = store.claim  # type: ignore[attr-defined]
    async with claim("s1"):
        with pytest.raises(SessionOwned) as err:
            async with claim("s1"):
                pass
        assert err.value.code == "session_owned"
        assert "process" in err.value.message
        async with claim("s2"):  # other sessions are independent
            pass
    async with claim("s1"):
        pass


async def test_model_requests_read_back_exactly_though_stored_by_reference(
    store: SessionStore,
) -> None:
    """A long tool-using turn, a compaction in the next, and a third turn: every read (all,
    after a seq, the tail) gives back the very requests the loop logged."""
    from steerable_bridge.runtime.model_context.compaction import CompactionSettings
    from tests.runtime.harness import make_agent, prompt, scripted

    call = {"tool_calls": [{"id": "c", "name": "echo", "arguments": {"text": "x" * 300}}]}
    provider = scripted(
        *[call] * 4,
        {"text": "done " * 30},
        {"text": "second"},
        {"text": "third"},
        summary_rounds=[{"text": "SUMMARY"}],
    )
    from tests.runtime.harness import text_tool

    agent = make_agent(
        provider,
        tools=[text_tool("echo")],
        store=store,  # type: ignore[arg-type]
        compaction=CompactionSettings(),
    )
    session = await agent.new_session("/work")
    await prompt(session, "first")
    await prompt(session, "second")
    from steerable_bridge.runtime.turns.turn import TurnInput

    await session.prompt(TurnInput(compact=True))
    await prompt(session, "third")
    logged = list(session.log.view())
    requests = [e for e in logged if isinstance(e, ev.ModelRequestEvent)]
    assert len(requests) == 7
    assert await store.read(session.id) == logged
    middle = requests[3].seq
    assert await store.read(session.id, after_seq=middle) == [e for e in logged if e.seq > middle]
    tail = await read_tail(store, session.id)
    by_seq = {e.seq: e for e in logged}
    assert len(tail) < len(logged) and all(by_seq[e.seq] == e for e in tail)
    assert [e for e in tail if isinstance(e, ev.ModelRequestEvent)][-1] == requests[-1]
    fresh = await make_agent(provider, store=store).load_session(session.id)  # type: ignore[arg-type]
    assert list(fresh.log.view()) == tail
    if isinstance(store, SqliteStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            sizes = [
                len(data)
                for (data,) in conn.execute(
                    "SELECT data FROM events WHERE kind = 'model_request' ORDER BY seq"
                )
            ]
        from steerable_bridge.runtime.encoding.codec import event_to_json

        full = [len(event_to_json(r)) for r in requests]
        assert all(sizes[i] < full[i] / 2 for i in (2, 3, 4))  # only what is new is stored


async def _tool_session(store: SessionStore) -> list[ev.LoopEvent]:
    """Two tool-using turns, a manual compaction, a third turn: the logged events."""
    from steerable_bridge.runtime.model_context.compaction import CompactionSettings
    from steerable_bridge.runtime.turns.turn import TurnInput
    from tests.runtime.harness import make_agent, prompt, scripted, text_tool

    call = {"tool_calls": [{"id": "c", "name": "echo", "arguments": {"text": "x" * 300}}]}
    provider = scripted(
        call, call, {"text": "one"}, call, {"text": "two"}, {"text": "three"},
        summary_rounds=[{"text": "SUMMARY"}],
    )  # fmt: skip
    agent = make_agent(
        provider,
        tools=[text_tool("echo")],
        store=store,  # type: ignore[arg-type]
        compaction=CompactionSettings(),
    )
    session = await agent.new_session("/work")
    await prompt(session, "first")
    await prompt(session, "second")
    await session.prompt(TurnInput(compact=True))
    await prompt(session, "third")
    return list(session.log.view())


async def test_a_tail_read_fetches_the_rows_its_requests_refer_to_before_the_tail(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that keeps its base across a compaction (as a log another process wrote
    can) makes the tail's first request refer to rows before the tail: the read fetches
    them and gives back the logged requests exactly."""
    from steerable_bridge.adapters.storage.request_writer import RequestWriter

    body = RequestWriter.body

    def keep_base(self: RequestWriter, event: ev.LoopEvent) -> str:
        previous, sources = self.previous, dict(self.sources)
        text = body(self, event)
        if isinstance(event, ev.Compaction):
            self.previous, self.sources = previous, sources
        return text

    monkeypatch.setattr(RequestWriter, "body", keep_base)
    logged = await _tool_session(store)
    tail = await read_tail(store, store_id := logged[0].session_id)
    assert len(tail) < len(logged)
    by_seq = {e.seq: e for e in logged}
    assert tail == [by_seq[e.seq] for e in tail]
    assert [e for e in tail if isinstance(e, ev.ModelRequestEvent)]
    assert await store.read(store_id, after_seq=tail[-3].seq) == logged[-2:]
    assert await store.read(store_id) == logged


async def test_a_log_of_mixed_record_formats_reads_back_exactly(store: SessionStore) -> None:
    """Rows written by earlier builds (unstamped, format 1, format 2 requests by reference)
    among format-3 rows: every read gives back the logged events."""
    if isinstance(store, MemoryStore):
        pytest.skip("the memory store keeps events, not rows")
    from steerable_bridge.runtime.encoding.codec import event_to_json

    logged = await _tool_session(store)
    sid = logged[0].session_id
    requests = [e for e in logged if isinstance(e, ev.ModelRequestEvent)]
    older: dict[int, tuple[int | None, str]] = {}
    for number, event in enumerate(logged[:-12]):
        if not isinstance(event, ev.ModelRequestEvent):
            older[event.seq] = (None if number % 2 else 1, event_to_json(event))
    first, second = requests[0], requests[1]
    older[first.seq] = (2, event_to_json(first))
    prefix = len(first.request.messages)
    slim = json.loads(event_to_json(second))
    slim["request"]["messages"] = slim["request"]["messages"][prefix:]
    slim["request_ref"] = {"base_seq": first.seq, "prefix": prefix}
    older[second.seq] = (2, json.dumps(slim))
    await _rewrite(store, sid, older)
    assert await store.read(sid) == logged
    tail = await read_tail(store, sid)
    by_seq = {e.seq: e for e in logged}
    assert len(tail) < len(logged) and tail == [by_seq[e.seq] for e in tail]


async def _rewrite(store: SessionStore, sid: str, rows: dict[int, tuple[int | None, str]]) -> None:
    """Put older-format data into some rows, as the build that wrote them would have."""
    sql = "UPDATE events SET format = ?, data = ? WHERE session_id = ? AND seq = ?"
    params = [(found, data, sid, seq) for seq, (found, data) in rows.items()]
    if isinstance(store, SqliteStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            conn.executemany(sql, params)
        return
    import psycopg

    url = store.url  # type: ignore[attr-defined]
    async with (
        await psycopg.AsyncConnection.connect(
            url, autocommit=True, options="-c search_path=steerable"
        ) as conn,
        conn.cursor() as cur,
    ):
        await cur.executemany(sql.replace("?", "%s"), params)


async def test_the_user_who_created_a_session_is_kept_and_lists_filter_by_it(
    store: SessionStore,
) -> None:
    for sid, who, at in (("a1", "alice", 1000), ("b1", "bob", 2000), ("a2", "alice", 3000)):
        await store.create(
            SessionRecord(session_id=sid, cwd="/w", created_at=at, updated_at=at, user=who)
        )
    await store.create(record("n1"))  # created by no user (single-user mode)
    await store.append("a1", [text("a1", 0, ts=4000)])  # an append keeps the user
    alice = await store.list(user="alice")
    assert [r.session_id for r in alice.records] == ["a1", "a2"]
    assert {r.user for r in alice.records} == {"alice"}
    first = await store.list(user="alice", limit=1)
    rest = await store.list(user="alice", cursor=first.next_cursor)
    assert [r.session_id for r in (*first.records, *rest.records)] == ["a1", "a2"]
    assert [r.session_id for r in (await store.list(user="bob")).records] == ["b1"]
    assert len((await store.list()).records) == 4
    found = await store.get("a1")
    assert found is not None and found.user == "alice"
    plain = await store.get("n1")
    assert plain is not None and plain.user is None


async def test_adopt_gives_an_ownerless_session_to_a_user_and_never_takes_one(
    store: SessionStore,
) -> None:
    from dataclasses import replace

    from steerable_bridge.runtime.ports.storage import adopt_session

    await store.create(record("legacy"))
    await store.create(replace(record("bobs", at=1001), user="bob"))
    await store.append("legacy", [text("legacy", 0)])
    assert await adopt_session(store, "legacy", "alice") is True
    assert await adopt_session(store, "legacy", "alice") is True  # again: already hers
    assert await adopt_session(store, "legacy", "carol") is False  # never taken from her
    assert await adopt_session(store, "bobs", "alice") is False
    with pytest.raises(SessionNotFound):
        await adopt_session(store, "nope", "alice")
    # the record, the per-user listing and later appends all agree on the owner
    await store.append("legacy", [text("legacy", 1, ts=3000)])
    got = await store.get("legacy")
    assert got is not None and got.user == "alice" and got.updated_at == 3000
    assert [r.session_id for r in (await store.list(user="alice")).records] == ["legacy"]
    assert [r.session_id for r in (await store.list(user="bob")).records] == ["bobs"]
    assert [e.seq for e in await store.read("legacy")] == [0, 1]
