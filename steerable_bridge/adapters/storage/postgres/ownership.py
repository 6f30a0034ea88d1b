"""Who runs a turn in a session: one session-level advisory lock per claimed session.

A process claims a session (`claim`) by taking `pg_try_advisory_lock` on a key hashed from
the session id (`lock_key`), on one long-lived *owner* connection per process whose
application name says `steerable-bridge pid N on HOST`; a refused claim raises
SessionOwned naming that holder, read from `pg_locks` / `pg_stat_activity`. PostgreSQL drops
a connection's locks when it closes, so a process that dies frees its sessions. A process
never claims one session twice (checked locally before asking the server). The key is a
64-bit hash, in a keyspace the database may share with other applications.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from steerable_bridge.adapters.storage.postgres.driver import psycopg, unavailable
from steerable_bridge.runtime.ports.storage import SessionOwned

__all__ = ["AdvisoryLocks", "lock_key"]

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

_HOLDER_SQL = (
    "SELECT a.application_name, a.client_addr::text FROM pg_locks l"
    " JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid::bigint = %s AND l.objid::bigint = %s LIMIT 1"
)


def lock_key(session_id: str) -> int:
    """The session's advisory lock key: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks:
    """This process's claims on sessions, held on its owner connection.

    `connect` opens a new connection (the owner connection, on first claim); `pooled`
    lends one from the store's pool (for looking up another process's claim). `aclose()`
    closes the owner connection, which releases every claim."""

    def __init__(
        self,
        where: str,
        timeout_s: float,
        connect: Callable[[], Awaitable[Connection]],
        pooled: Callable[[], AbstractAsyncContextManager[Connection]],
    ) -> None:
        self.where = where
        self.timeout_s = timeout_s
        self._connect = connect
        self._pooled = pooled
        self._conn: Connection | None = None
        self._lock = anyio.Lock()
        self._claimed: set[str] = set()

    async def _owner_connection(self) -> Connection:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = await self._connect()
        except psycopg.Error as err:
            raise unavailable(self.where, err) from None
        self._conn = conn
        return conn

    @asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        """Own the session while a turn runs; raises SessionOwned naming the owner."""
        if session_id in self._claimed:
            raise SessionOwned(session_id, f"this process (pid {os.getpid()})")
        self._claimed.add(session_id)
        key = lock_key(session_id)
        try:
            async with self._lock:
                conn = await self._owner_connection()
                try:
                    cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                    got = (await cur.fetchone() or (False,))[0]
                except psycopg.Error as err:
                    raise unavailable(self.where, err) from None
            if not got:
                holder = await self.holder(session_id)
                raise SessionOwned(session_id, holder or "another process")
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout_s):
                    await self._unlock(conn, key)
        finally:
            self._claimed.discard(session_id)

    async def _unlock(self, conn: Connection, key: int) -> None:
        try:
            async with self._lock:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except psycopg.Error as err:  # the connection died: the server dropped its locks
            log.warning("releasing a session lock on %s failed: %s", self.where, err)

    async def owner(self, session_id: str) -> str | None:
        """Who runs a turn in the session now, for display (None when nobody)."""
        if session_id in self._claimed:
            return f"this process (pid {os.getpid()})"
        return await self.holder(session_id)

    async def holder(self, session_id: str) -> str | None:
        """The connection holding the session's lock, as `name at address`, or None."""
        key = lock_key(session_id)
        high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        async with self._pooled() as conn:
            row = await (await conn.execute(_HOLDER_SQL, (high, low))).fetchone()
        if row is None:
            return None
        name, address = row
        return f"{name or 'a PostgreSQL client'}" + (f" at {address}" if address else "")

    async def aclose(self) -> None:
        """Close the owner connection (the server drops its locks)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
