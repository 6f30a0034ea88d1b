"""`PostgresStore`: the `SessionStore` port over one PostgreSQL database.

This module holds the connections and wires the port's methods to the modules that do the
work: `schema` (tables, versioning), `appends`, `reads`, `ownership` (advisory locks) and
`signals` (LISTEN/NOTIFY). Connections come from one `psycopg_pool.AsyncConnectionPool`
per process, opened on first use; a forked worker notices its new pid and opens its own
pool and owner connection instead of touching the parent's. A pool that stays exhausted
is `store_busy`; any driver failure is `store_unavailable` naming the URL without its
password (`driver.py`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge.adapters.storage.cursor import decode_cursor, encode_cursor
from steerable_bridge.adapters.storage.formats import decode_record
from steerable_bridge.adapters.storage.integrity import CheckReport
from steerable_bridge.adapters.storage.postgres import appends, reads, signals
from steerable_bridge.adapters.storage.postgres.driver import (
    connect_kwargs,
    psycopg,
    psycopg_pool,
    redact,
    require_driver,
    unavailable,
)
from steerable_bridge.adapters.storage.postgres.ownership import AdvisoryLocks
from steerable_bridge.adapters.storage.postgres.schema import migrate
from steerable_bridge.adapters.storage.request_writer import RequestWriter, resume_writer
from steerable_bridge.adapters.storage.sql import (
    ADOPT,
    ADOPT_ROW,
    INSERT_SESSION,
    adopted_row,
    event_rows,
    list_query,
    pg,
    session_row,
)
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.agent_sessions.signals import SessionSignal
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionPage,
    SessionRecord,
    StoreError,
)
from steerable_bridge.runtime.session_log.delta_runs import Entry

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

__all__ = ["PostgresStore"]


def _identity() -> str:
    return f"steerable-bridge pid {os.getpid()} on {socket.gethostname()}"


class PostgresStore:
    """Sessions in one PostgreSQL database (see the package docstring). `aclose()` when done."""

    def __init__(
        self, url: str, *, pool_size: int = 10, timeout_s: float = 10.0, app: str | None = None
    ) -> None:
        require_driver()
        self.url = url
        self.where = redact(url)
        self.pool_size = pool_size
        self.timeout_s = timeout_s
        self.identity = app or _identity()
        self._pool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._writers: IdleCache[str, RequestWriter] = IdleCache(capacity=256, ttl_s=3600)
        """Each session's `RequestWriter`: its next model request is stored by reference."""
        self._opening = anyio.Lock()
        self._pid = os.getpid()
        self._locks = self._new_locks()

    # -- plumbing ---------------------------------------------------------------------------

    def _new_locks(self) -> AdvisoryLocks:
        return AdvisoryLocks(self.where, self.timeout_s, self._connect, self._conn)

    async def _connect(self) -> Connection:
        """A new connection outside the pool (the owner and listening connections)."""
        await self._opened()  # the schema exists, the pid is current
        return await psycopg.AsyncConnection.connect(
            self.url, **connect_kwargs(self.identity, self.timeout_s)
        )

    async def _opened(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        if self._pid != os.getpid():  # forked: the parent's connections are not ours
            self._pool, self._pid = None, os.getpid()
            self.identity = _identity()
            self._opening = anyio.Lock()
            self._locks = self._new_locks()
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is not None:
                return self._pool
            pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                kwargs=connect_kwargs(self.identity, self.timeout_s),
                timeout=self.timeout_s,
                open=False,
                name="steerable-bridge",
            )
            try:
                await pool.open(wait=True, timeout=self.timeout_s)
                async with pool.connection() as conn:
                    await migrate(conn, self.where)
            except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as err:
                await pool.close()
                raise unavailable(self.where, err) from None
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            return pool

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Connection]:
        pool = await self._opened()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg_pool.PoolTimeout as err:
            raise StoreError(
                "store_busy",
                f"no connection to {self.where} came free within {self.timeout_s:g}s ({err});"
                " raise the server's max_connections or retry",
            ) from None
        except psycopg.Error as err:
            raise unavailable(self.where, err) from None

    async def aclose(self) -> None:
        """Close the owner connection (dropping its locks) and the pool."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout_s):
            if self._pid != os.getpid():
                return  # a forked child never closes its parent's connections
            await self._locks.aclose()
            pool, self._pool = self._pool, None
            if pool is not None:
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

    @property
    def writers_in_memory(self) -> int:
        """Sessions whose request writer this store keeps in memory."""
        return len(self._writers)

    def forget(self, session_id: str) -> None:
        """Drop the session's request writer (the agent let the session go; a read of the
        session resumes one)."""
        self._writers.pop(session_id)

    async def append(self, session_id: str, events: Sequence[LoopEvent]) -> None:
        batch = list(events)
        writer = self._writers.pop(session_id) or RequestWriter()
        rows = event_rows(session_id, batch, writer)  # a failed append forgets the writer
        async with self._conn() as conn:
            await appends.append_rows(conn, session_id, batch, rows)
        self._writers.put(session_id, writer)
        self._writers.sweep(lambda _: True)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        async with self._conn() as conn:
            events, last = await reads.read_after(conn, session_id, after_seq)
        resume_writer(self._writers, session_id, events, last)  # a reload: see request_writer.py
        return events

    async def read_tail(self, session_id: str) -> list[LoopEvent]:
        """From `tail_start` of the newest history compaction on, after the fact-carrying
        events."""
        async with self._conn() as conn:
            events, last = await reads.read_tail(conn, session_id)
        resume_writer(self._writers, session_id, events, last)
        return events

    async def read_tail_entries(self, session_id: str) -> list[Entry]:
        """`read_tail` with each stored run of deltas as one `DeltaRun` (`delta_runs.py`)."""
        async with self._conn() as conn:
            entries, last = await reads.read_tail_entries(conn, session_id)
        resume_writer(self._writers, session_id, entries, last)
        return entries

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._conn() as conn:
            return await reads.get_record(conn, session_id)

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        after = decode_cursor(cursor) if cursor is not None else None
        limit = max(1, limit)
        sql, params = list_query(cwd, after, limit, user)
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
                user=owner,
            )
            for sid, where, title, model, created, updated, owner in rows[:limit]
        )
        more = len(rows) > limit and records
        return SessionPage(
            records=records, next_cursor=encode_cursor(records[-1]) if more else None
        )

    async def adopt(self, session_id: str, user: str) -> bool:
        """Give a session stored without an owner to `user` (`storage.adopt_session`)."""
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(pg(ADOPT_ROW) + " FOR UPDATE", (session_id,))
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            found, data, owner = row
            if owner is not None:
                return bool(owner == user)
            record = decode_record(session_id, found, data)
            await conn.execute(pg(ADOPT), adopted_row(record, user))
            return True

    async def delete(self, session_id: str) -> bool:
        """Remove a session; raises SessionOwned while another process runs a turn in it."""
        async with self.claim(session_id), self._conn() as conn, conn.transaction():
            await conn.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
            gone = await conn.execute("DELETE FROM sessions WHERE session_id = %s", (session_id,))
            return gone.rowcount > 0

    # -- ownership and signals --------------------------------------------------------------

    @asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        """Own the session while a turn runs; raises SessionOwned naming the owner."""
        await self._opened()  # a forked process gets its own locks first
        async with self._locks.claim(session_id):
            yield

    async def owner(self, session_id: str) -> str | None:
        """Who runs a turn in the session now, for display (None when nobody)."""
        await self._opened()
        return await self._locks.owner(session_id)

    async def publish(self, signal: SessionSignal) -> None:
        """Send a signal to every listening process (`signals.py`)."""
        async with self._conn() as conn:
            await signals.publish(conn, signal)

    async def listen(
        self,
        deliver: Callable[[SessionSignal], object],
        *,
        task_status: TaskStatus[None] = TASK_STATUS_IGNORED,
    ) -> None:
        """Deliver every published signal until cancelled, reconnecting after failures;
        reports itself started once it listens."""
        await self._opened()
        await signals.listen(
            self.where, self._connect, self._conn, deliver, task_status=task_status
        )

    # -- maintenance ------------------------------------------------------------------------

    async def check(self, *, limit: int = 200) -> CheckReport:
        """Verify every row (as `sessions check` does for SQLite); changes nothing."""
        async with self._conn() as conn:
            return await reads.check(conn, self.where, limit=limit)
