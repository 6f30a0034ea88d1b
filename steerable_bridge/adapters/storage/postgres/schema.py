"""The PostgreSQL store's tables and their versioning: created on first use, never altered
by an older build.

The tables (`sessions`, `events`, `signals`, and `meta` holding `schema_version`) live in
the `steerable` schema and have the SQLite store's layout (`sql.py`). `migrate` runs on
the first connection of each process under a transaction-level advisory lock, so two
processes starting at once cannot both create them; a database whose `schema_version` is
newer than `SCHEMA_VERSION` is refused (`store_too_new`, naming the remedy) and left as it
is. A new schema version adds a step here that upgrades the previous one in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from steerable_bridge.adapters.storage.postgres.driver import SCHEMA
from steerable_bridge.runtime.ports.storage import StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "migrate", "stored_version"]

SCHEMA_VERSION = 2
"""`meta.schema_version` of the tables below."""

_MIGRATION_LOCK = 0x5354_4545_5242_0001  # "STEERB" + 1: serialises schema creation

_META = [
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
]

_USERS = [
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS user_id TEXT",
    "CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions"
    " (user_id, updated_at DESC, session_id DESC)",
]
"""Schema 1 to 2: who created each session (`SessionRecord.user`); old rows have none."""

_TABLES = [
    """CREATE TABLE sessions (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        model TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT -1,
        format INTEGER,
        data TEXT NOT NULL,
        user_id TEXT
    )""",
    "CREATE INDEX sessions_by_update ON sessions (updated_at DESC, session_id DESC)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, session_id DESC)",
    "CREATE INDEX sessions_by_user ON sessions (user_id, updated_at DESC, session_id DESC)",
    """CREATE TABLE events (
        session_id TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        run_id TEXT NOT NULL,
        ts BIGINT NOT NULL,
        facts SMALLINT NOT NULL,
        format INTEGER,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX events_by_kind ON events (session_id, kind, seq)",
    "CREATE INDEX events_with_facts ON events (session_id, seq) WHERE facts = 1",
    """CREATE TABLE signals (
        id BIGSERIAL PRIMARY KEY,
        data TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
]


async def stored_version(conn: psycopg.AsyncConnection[Any]) -> int:
    """The database's `schema_version` (0 before the tables exist)."""
    cur = await conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])


async def migrate(conn: psycopg.AsyncConnection[Any], where: str) -> None:
    """Create the tables if the database has none; refuse one from a newer build."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        for statement in _META:
            await conn.execute(statement)
        version = await stored_version(conn)
        if version > SCHEMA_VERSION:
            raise StoreError(
                "store_too_new",
                f"{where} was set up by a newer steerable-bridge (schema {version};"
                f" this build knows {SCHEMA_VERSION}); upgrade steerable-bridge to use it",
            )
        if version == 0:
            for statement in _TABLES:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)", (SCHEMA_VERSION,)
            )
        elif version == 1:
            for statement in _USERS:
                await conn.execute(statement)
            await conn.execute(
                "UPDATE meta SET value = %s WHERE key = 'schema_version'", (SCHEMA_VERSION,)
            )
