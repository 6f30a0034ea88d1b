"""PostgreSQL `SessionStore`: sessions shared by processes on several machines.

Selected with `--storage postgresql://user:pass@host/db` (or `postgres://`); needs the
`postgresql` extra (psycopg 3 and psycopg_pool). Tables live in the `steerable` schema of
that database, created on first use; they have the SQLite store's layout and queries
(`sql.py`), rows carry the same record format stamp and are read through the same upgrade
chain (`formats.py`), and a database from a newer build is refused (`store_too_new`),
never altered. Appends lock the session's row (`FOR UPDATE`), check seqs (`appending.py`)
and write the batch in one transaction — large batches through `COPY`. The resume tail is
read through the same indexes (`events_by_kind`, `events_with_facts`).

Connections come from one `psycopg_pool.AsyncConnectionPool` per process, opened on first
use (a forked worker opens its own). Ownership: a turn holds a session-level advisory lock
(`pg_try_advisory_lock`, keyed by a hash of the session id) on this process's owner
connection, named `steerable-bridge pid N on HOST` so a refused process can say who holds
it; PostgreSQL drops the locks of a connection that dies with its process. Signals (steer,
follow-up, cancel for a turn another process runs; `runtime/signals.py`) travel by
`NOTIFY steerable_signals` — inline when small, else through the `signals` table — and
`listen()` keeps a `LISTEN` connection, reconnecting after a failure. Delivery takes one
round trip through the server (milliseconds). Every failure is a `StoreError` naming the
remedy; the password in the URL is never printed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge.adapters.storage.appending import check_batch
from steerable_bridge.adapters.storage.cursor import decode_cursor, encode_cursor
from steerable_bridge.adapters.storage.formats import FORMAT as RECORD_FORMAT
from steerable_bridge.adapters.storage.formats import (
    Resolver,
    decode_record,
    format_too_new,
    history_compaction,
)
from steerable_bridge.adapters.storage.integrity import CheckReport, check_log, salvaged
from steerable_bridge.adapters.storage.sql import (
    EVENT_COLUMNS,
    FETCH_ROW,
    INSERT_EVENT,
    INSERT_SESSION,
    READ_AFTER,
    SESSION_ROW,
    TAIL_COMPACTION,
    TAIL_FACTS,
    TAIL_FROM,
    TAIL_RUN_START,
    UPDATE_AFTER_APPEND,
    event_rows,
    list_query,
    pg,
    session_row,
    update_after_append,
)
from steerable_bridge.runtime.events import LoopEvent, ModelRequestEvent
from steerable_bridge.runtime.idle import IdleCache
from steerable_bridge.runtime.signals import SessionSignal, signal_from_json, signal_to_json
from steerable_bridge.runtime.storage import (
    SessionNotFound,
    SessionOwned,
    SessionPage,
    SessionRecord,
    StoreError,
    tail_start,
)

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - reported by PostgresStore() with the remedy
    psycopg = None  # type: ignore[assignment]

__all__ = ["SCHEMA", "SCHEMA_VERSION", "PostgresStore", "redact"]

log = logging.getLogger(__name__)

SCHEMA = "steerable"
SCHEMA_VERSION = 1
CHANNEL = "steerable_signals"
INLINE_LIMIT = 7000
"""Signals whose JSON is longer go through the `signals` table (NOTIFY carries < 8000 bytes)."""
COPY_FROM = 16
"""Batches at least this long are written with COPY instead of INSERTs."""
_MIGRATION_LOCK = 0x5354_4545_5242_0001  # "STEERB" + 1: serialises schema creation

_TABLES = [
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    """CREATE TABLE sessions (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        model TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT -1,
        format INTEGER,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_by_update ON sessions (updated_at DESC, session_id DESC)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, session_id DESC)",
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

_OWNER_SQL = (
    "SELECT a.application_name, a.client_addr::text FROM pg_locks l"
    " JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid::bigint = %s AND l.objid::bigint = %s LIMIT 1"
)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def lock_key(session_id: str) -> int:
    """The session's advisory lock key: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _unavailable(where: str, err: BaseException) -> StoreError:
    text = " ".join(str(err).split()) or type(err).__name__
    return StoreError(
        "store_unavailable",
        f"cannot use the PostgreSQL session store {where} ({text}); check that the server is"
        " up, the URL in --storage / STEERABLE_STORAGE, and the user's rights (it needs to"
        f" create the schema {SCHEMA!r} on first use)",
    )


class PostgresStore:
    """Sessions in one PostgreSQL database (see the module docstring). `aclose()` when done."""

    def __init__(
        self, url: str, *, pool_size: int = 10, timeout_s: float = 10.0, app: str | None = None
    ) -> None:
        if psycopg is None:
            raise StoreError(
                "store_unavailable",
                "--storage postgresql://... needs psycopg: install steerable-bridge[postgresql]",
            )
        self.url = url
        self.where = redact(url)
        self.pool_size = pool_size
        self.timeout_s = timeout_s
        self.identity = app or f"steerable-bridge pid {os.getpid()} on {socket.gethostname()}"
        self._pool: AsyncConnectionPool[Any] | None = None
        self._requests: IdleCache[str, ModelRequestEvent] = IdleCache(capacity=256, ttl_s=3600)
        """Each session's last stored model request: the next one is stored by reference."""
        self._owner_conn: psycopg.AsyncConnection[Any] | None = None
        self._opening = anyio.Lock()
        self._owner_lock = anyio.Lock()
        self._pid = os.getpid()
        self._claimed: set[str] = set()
        self._appends = 0

    # -- plumbing ---------------------------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        return {
            "autocommit": True,
            "options": f"-c search_path={SCHEMA}",
            "application_name": self.identity,
            "connect_timeout": max(1, int(self.timeout_s)),
        }

    async def _opened(self) -> AsyncConnectionPool[Any]:
        if self._pid != os.getpid():  # forked: the parent's connections are not ours
            self._pool, self._owner_conn, self._pid = None, None, os.getpid()
            self.identity = f"steerable-bridge pid {os.getpid()} on {socket.gethostname()}"
            self._opening, self._owner_lock = anyio.Lock(), anyio.Lock()
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is not None:
                return self._pool
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                kwargs=self._connect_kwargs(),
                timeout=self.timeout_s,
                open=False,
                name="steerable-bridge",
            )
            try:
                await pool.open(wait=True, timeout=self.timeout_s)
                async with pool.connection() as conn:
                    await self._migrate(conn)
            except (psycopg.Error, PoolTimeout, OSError) as err:
                await pool.close()
                raise _unavailable(self.where, err) from None
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            return pool

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(_TABLES[0])
            await conn.execute(_TABLES[1])
            cur = await conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            row = await cur.fetchone()
            version = 0 if row is None else int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    "store_too_new",
                    f"{self.where} was set up by a newer steerable-bridge (schema {version};"
                    f" this build knows {SCHEMA_VERSION}); upgrade steerable-bridge to use it",
                )
            if version == 0:
                for statement in _TABLES[2:]:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', %s)", (SCHEMA_VERSION,)
                )

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        pool = await self._opened()
        try:
            async with pool.connection() as conn:
                yield conn
        except PoolTimeout as err:
            raise StoreError(
                "store_busy",
                f"no connection to {self.where} came free within {self.timeout_s:g}s ({err});"
                " raise the server's max_connections or retry",
            ) from None
        except psycopg.Error as err:
            raise _unavailable(self.where, err) from None

    async def aclose(self) -> None:
        """Close the owner connection (dropping its locks) and the pool."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout_s):
            owner, self._owner_conn = self._owner_conn, None
            if owner is not None and self._pid == os.getpid():
                await owner.close()
            pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                await pool.close()

    # -- the SessionStore port --------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        async with self._conn() as conn:
            try:
                await conn.execute(pg(INSERT_SESSION), session_row(record))
            except psycopg.errors.UniqueViolation:
                raise StoreError(
                    "session_exists",
                    f"session {record.session_id} already exists; pick another id",
                ) from None

    async def append(self, session_id: str, events: Sequence[LoopEvent]) -> None:
        batch = list(events)
        previous = self._requests.peek(session_id)
        rows, newest = event_rows(session_id, batch, previous)
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(pg(SESSION_ROW) + " FOR UPDATE", (session_id,))
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            last, found, data = row
            record = decode_record(session_id, found, data)
            title = check_batch(session_id, last, batch, record.title)
            if not batch:
                return
            if len(rows) >= COPY_FROM:
                async with conn.cursor().copy(f"COPY events ({EVENT_COLUMNS}) FROM STDIN") as copy:
                    for values in rows:
                        await copy.write_row(values)
            else:
                async with conn.cursor() as many:
                    await many.executemany(pg(INSERT_EVENT), rows)
            await conn.execute(pg(UPDATE_AFTER_APPEND), update_after_append(record, batch, title))
        if newest is not None and newest is not previous:
            self._requests.put(session_id, newest)
            self._requests.sweep(lambda _: True)

    async def _decode_all(
        self, conn: psycopg.AsyncConnection[Any], session_id: str, rows: list[Any]
    ) -> list[LoopEvent]:
        """The rows' events; requests stored by reference are rebuilt, fetching base rows
        the read did not include."""
        resolver = Resolver(session_id)
        while need := resolver.missing(rows):
            for seq in sorted(need):
                cur = await conn.execute(pg(FETCH_ROW), (session_id, seq))
                found = await cur.fetchone()
                if found is None:
                    raise StoreError(
                        "corrupt_record",
                        f"session {session_id} refers to model request seq {seq}, which is"
                        " not stored; run `steerable-bridge sessions check`",
                    )
                resolver.extra[seq] = (found[0], found[1], found[2])
        return resolver.decode_all(rows)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        async with self._conn() as conn:
            await self._require(conn, session_id)
            cur = await conn.execute(pg(READ_AFTER), (session_id, after_seq))
            rows = await cur.fetchall()
            return await self._decode_all(conn, session_id, rows)

    async def read_tail(self, session_id: str) -> list[LoopEvent]:
        """From `tail_start` of the newest history compaction on, after the fact-carrying
        events."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            await self._require(conn, session_id)
            start = -1
            compactions = await conn.execute(pg(TAIL_COMPACTION), (session_id,))
            found = history_compaction(session_id, [row async for row in compactions])
            if found is not None:
                run = await (
                    await conn.execute(pg(TAIL_RUN_START), (session_id, found.seq))
                ).fetchone()
                start = tail_start(found, int(run[0]) if run is not None else found.seq)
            rows = await (await conn.execute(pg(TAIL_FACTS), (session_id, start))).fetchall()
            rows += await (await conn.execute(pg(TAIL_FROM), (session_id, start))).fetchall()
            return await self._decode_all(conn, session_id, rows)

    async def _require(self, conn: psycopg.AsyncConnection[Any], session_id: str) -> None:
        cur = await conn.execute("SELECT format FROM sessions WHERE session_id = %s", (session_id,))
        row = await cur.fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        if row[0] is not None and row[0] > RECORD_FORMAT:
            raise format_too_new(f"session {session_id}", row[0])

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT format, data FROM sessions WHERE session_id = %s", (session_id,)
            )
            row = await cur.fetchone()
        return None if row is None else decode_record(session_id, row[0], row[1])

    async def list(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> SessionPage:
        after = decode_cursor(cursor) if cursor is not None else None
        limit = max(1, limit)
        sql, params = list_query(cwd, after, limit)
        async with self._conn() as conn:
            rows = await (await conn.execute(pg(sql), params)).fetchall()
        records = tuple(
            SessionRecord(
                session_id=sid,
                cwd=where,
                title=title,
                model=model,
                created_at=created,
                updated_at=updated,
            )
            for sid, where, title, model, created, updated in rows[:limit]
        )
        more = len(rows) > limit and records
        return SessionPage(
            records=records, next_cursor=encode_cursor(records[-1]) if more else None
        )

    async def delete(self, session_id: str) -> bool:
        """Remove a session; raises SessionOwned while another process runs a turn in it."""
        async with self.claim(session_id), self._conn() as conn, conn.transaction():
            await conn.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
            gone = await conn.execute("DELETE FROM sessions WHERE session_id = %s", (session_id,))
            return gone.rowcount > 0

    # -- ownership --------------------------------------------------------------------------

    async def _owner_connection(self) -> psycopg.AsyncConnection[Any]:
        await self._opened()  # the schema exists, the pid is current
        conn = self._owner_conn
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, **self._connect_kwargs())
        except psycopg.Error as err:
            raise _unavailable(self.where, err) from None
        self._owner_conn = conn
        return conn

    @asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        """Own the session while a turn runs; raises SessionOwned naming the owner."""
        if session_id in self._claimed:
            raise SessionOwned(session_id, f"this process (pid {os.getpid()})")
        self._claimed.add(session_id)
        key = lock_key(session_id)
        try:
            async with self._owner_lock:
                conn = await self._owner_connection()
                try:
                    cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                    got = (await cur.fetchone() or (False,))[0]
                except psycopg.Error as err:
                    raise _unavailable(self.where, err) from None
            if not got:
                holder = await self._lock_holder(session_id)
                raise SessionOwned(session_id, holder or "another process")
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout_s):
                    await self._unlock(conn, key)
        finally:
            self._claimed.discard(session_id)

    async def _unlock(self, conn: psycopg.AsyncConnection[Any], key: int) -> None:
        try:
            async with self._owner_lock:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except psycopg.Error as err:  # the connection died: the server dropped its locks
            log.warning("releasing a session lock on %s failed: %s", self.where, err)

    async def owner(self, session_id: str) -> str | None:
        """Who runs a turn in the session now, for display (None when nobody)."""
        if session_id in self._claimed:
            return f"this process (pid {os.getpid()})"
        return await self._lock_holder(session_id)

    async def _lock_holder(self, session_id: str) -> str | None:
        key = lock_key(session_id)
        high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        async with self._conn() as conn:
            row = await (await conn.execute(_OWNER_SQL, (high, low))).fetchone()
        if row is None:
            return None
        name, address = row
        return f"{name or 'a PostgreSQL client'}" + (f" at {address}" if address else "")

    # -- signals ----------------------------------------------------------------------------

    async def publish(self, signal: SessionSignal) -> None:
        """Send a signal to every listening process (see the module docstring)."""
        data = signal_to_json(signal)
        async with self._conn() as conn:
            if len(data.encode()) <= INLINE_LIMIT:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, data))
                return
            async with conn.transaction():
                cur = await conn.execute(
                    "INSERT INTO signals (data) VALUES (%s) RETURNING id", (data,)
                )
                row = await cur.fetchone()
                assert row is not None
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"@{row[0]}"))
                await conn.execute(
                    "DELETE FROM signals WHERE created_at < now() - interval '10 minutes'"
                )

    async def listen(
        self,
        deliver: Callable[[SessionSignal], object],
        *,
        task_status: TaskStatus[None] = TASK_STATUS_IGNORED,
    ) -> None:
        """Deliver every published signal until cancelled, reconnecting after failures;
        reports itself started once it listens."""
        await self._opened()
        delay = 0.5
        started = False
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, **self._connect_kwargs())
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    if not started:
                        started = True
                        task_status.started()
                    delay = 0.5
                    while True:
                        async for note in conn.notifies(timeout=30.0):
                            signal = await self._signal_of(note.payload)
                            if signal is not None:
                                deliver(signal)
                        await conn.execute("SELECT 1")  # a quiet half minute: still there?
            except psycopg.Error as err:
                if not started:
                    raise _unavailable(self.where, err) from None
                log.warning(
                    "listening for signals on %s failed (%s); retrying in %gs",
                    self.where,
                    err,
                    delay,
                )
            await anyio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _signal_of(self, payload: str) -> SessionSignal | None:
        """The signal a notification carries (a large one is read from the table through the
        pool: the listening connection is busy iterating its notifications)."""
        try:
            if payload.startswith("@"):
                async with self._conn() as conn:
                    cur = await conn.execute(
                        "SELECT data FROM signals WHERE id = %s", (int(payload[1:]),)
                    )
                    row = await cur.fetchone()
                if row is None:
                    return None
                payload = row[0]
            return signal_from_json(payload)
        except ValueError as err:  # pydantic's ValidationError is one
            log.warning("ignored a signal that does not decode: %s", err)
            return None

    # -- maintenance ------------------------------------------------------------------------

    async def check(self, *, limit: int = 200) -> CheckReport:
        """Verify every row (as `sessions check` does for SQLite); changes nothing."""
        report = CheckReport(path=self.where)
        async with self._conn() as conn:
            row = await (
                await conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            ).fetchone()
            version = 0 if row is None else int(row[0])
            if version != SCHEMA_VERSION:
                report.problems.append(
                    f"schema version {version}; this build uses {SCHEMA_VERSION}"
                    + (" (upgrade steerable-bridge)" if version > SCHEMA_VERSION else "")
                )
                return report
            sessions = await (
                await conn.execute(
                    "SELECT session_id, last_seq, format FROM sessions ORDER BY session_id"
                )
            ).fetchall()
            for session_id, last_seq, found in sessions:
                cur = await conn.execute(
                    "SELECT seq, format, data FROM events WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                )
                resolver = Resolver(session_id)
                items = [
                    salvaged(session_id, s, f, d, resolver) for s, f, d in await cur.fetchall()
                ]
                check_log(report, session_id, last_seq, found, items)
            orphans = await (
                await conn.execute(
                    "SELECT count(*) FROM events e WHERE NOT EXISTS"
                    " (SELECT 1 FROM sessions s WHERE s.session_id = e.session_id)"
                )
            ).fetchone()
            if orphans and orphans[0]:
                report.problems.append(f"{orphans[0]} events belong to no session")
        del report.problems[limit:]
        return report
