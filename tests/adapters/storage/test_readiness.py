"""The start-up checks of a store (`readiness.py`) against real files and a real PostgreSQL:
a usable store passes, each kind of unusable one is named with its code, and a full server
disk maps to `storage_full`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import psycopg
import pytest

from steerable_bridge.adapters.storage.postgres import PostgresStore
from steerable_bridge.adapters.storage.postgres.driver import unavailable
from steerable_bridge.adapters.storage.readiness import postgres_problem, sqlite_problem
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime.ports.storage import SessionRecord
from tests.refusing_port import refusing_port


def test_a_new_path_and_an_existing_store_pass(tmp_path: Path) -> None:
    fresh = tmp_path / "deep" / "new.db"
    assert sqlite_problem(str(fresh)) is None
    existing = tmp_path / "used.db"
    store = SqliteStore(existing)
    record = SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1)
    anyio.run(store.create, record)
    store.close()
    assert sqlite_problem(str(existing)) is None


def test_each_unusable_file_is_named_with_its_code(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 7")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    found = {
        name: sqlite_problem(str(path))
        for name, path in [
            ("notes", notes),
            ("newer", newer),
            ("foreign", foreign),
            ("blocked", blocker / "s.db"),
        ]
    }
    codes = {name: problem.code for name, problem in found.items() if problem is not None}
    assert codes == {
        "notes": "store_corrupt",
        "newer": "store_too_new",
        "foreign": "store_foreign",
        "blocked": "store_unavailable",
    }
    assert all(str(tmp_path) in p.message for p in found.values() if p is not None)


def test_postgresql_down_is_named_at_once() -> None:
    with refusing_port() as port:
        url = f"postgresql://nobody@127.0.0.1:{port}/db"
        problem = postgres_problem(url, url)
    assert problem is not None and problem.code == "store_unavailable"
    assert "within 5s" in problem.message


def test_a_live_postgresql_passes_and_a_newer_schema_is_refused(pg_url: str) -> None:
    assert postgres_problem(pg_url, "db") is None  # nothing created yet: fine
    store = PostgresStore(pg_url)
    record = SessionRecord(session_id="s1", cwd="/w", created_at=1, updated_at=1)

    async def create() -> None:
        try:
            await store.create(record)
        finally:
            await store.aclose()

    anyio.run(create)
    assert postgres_problem(pg_url, "db") is None
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE steerable.meta SET value = 99 WHERE key = 'schema_version'")
    problem = postgres_problem(pg_url, "db")
    assert problem is not None and problem.code == "store_too_new"


def test_the_server_disk_full_error_is_storage_full() -> None:
    error = unavailable("postgresql://db", psycopg.errors.DiskFull("could not extend file"))
    assert error.code == "storage_full" and "free some space" in error.message
    other = unavailable("postgresql://db", psycopg.OperationalError("connection reset"))
    assert other.code == "store_unavailable"


def test_sqlite_full_is_storage_full(tmp_path: Path) -> None:
    from steerable_bridge.adapters.storage.sqlite import store_error

    db = tmp_path / "s.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x BLOB)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(sqlite3.OperationalError) as full:
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    assert store_error(db, full.value).code == "storage_full"
