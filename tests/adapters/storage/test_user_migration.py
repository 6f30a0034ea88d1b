"""A store written before sessions had users (schema 1) is upgraded in place when opened:
its sessions load, with no user, and new ones keep theirs (SQLite and PostgreSQL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.storage import SessionRecord, SessionStore

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _record(sid: str, user: str | None = None) -> SessionRecord:
    return SessionRecord(session_id=sid, cwd="/w", created_at=1, updated_at=1, user=user)


async def _check_upgraded(store: SessionStore) -> None:
    old = await store.get("old")
    assert old is not None and old.user is None
    assert [e.seq for e in await store.read("old")] == [0]
    await store.create(_record("new", "alice"))
    assert [r.session_id for r in (await store.list(user="alice")).records] == ["new"]
    assert {r.session_id for r in (await store.list()).records} == {"old", "new"}


async def _seed(store: SessionStore) -> None:
    await store.create(_record("old"))
    delta = ev.TextDelta(session_id="old", run_id="r", seq=0, ts=2, message_id="m", delta="hi")
    await store.append("old", [delta])


async def test_an_sqlite_file_of_schema_1_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    await _seed(store)
    store.close()
    conn = sqlite3.connect(path)  # back to schema 1, as an older build left it
    conn.execute("DROP INDEX sessions_by_user")
    conn.execute("ALTER TABLE sessions DROP COLUMN user_id")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    reopened = SqliteStore(path)
    try:
        await _check_upgraded(reopened)
    finally:
        reopened.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()


async def test_a_postgresql_database_of_schema_1_is_upgraded(pg_url: str) -> None:
    import psycopg

    from steerable_bridge.adapters.storage.postgres import PostgresStore

    store = PostgresStore(pg_url)
    await _seed(store)
    await store.aclose()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("DROP INDEX steerable.sessions_by_user")
        await conn.execute("ALTER TABLE steerable.sessions DROP COLUMN user_id")
        await conn.execute("UPDATE steerable.meta SET value = 1 WHERE key = 'schema_version'")
    reopened = PostgresStore(pg_url)
    try:
        await _check_upgraded(reopened)
    finally:
        await reopened.aclose()
