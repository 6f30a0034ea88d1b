"""SQLite `SessionStore`: durable sessions that several processes can share (`--storage PATH`).

One database file in WAL mode (readers never wait for the writer; a crash never leaves a
half-written transaction) with a busy timeout for the moments two processes both write.
`sessions` holds one row per session and `events` one row per LoopEvent (or per run of
streamed deltas, `runs.py`); each row keeps its JSON body in `data`, stamped with its record
format (`formats.py`),
beside the indexed columns that listing, paging and the resume tail-scan read (session id,
seq, kind, run id, times, cwd, title). Appends check seq inside a `BEGIN IMMEDIATE`
transaction, so two writers can never interleave one session's log.

Threading: the stdlib `sqlite3` module blocks, so every call runs in one of the store's own
threads (`store_threads.py`: a fixed few, started at the first call, so a burst starts
none). Writes go through one connection behind a capacity limiter of one:
SQLite lets one writer in at a time anyway. Reads of a log, a record or a page of the list
go to a small pool of reader connections (`READERS`, their own limiters, first come first
served): under WAL each reads its own snapshot while the writer commits, so a burst of
threads loading their history never queues the appends of the runs already going behind
those loads, and whole-log reads (`WHOLE_LOG_READERS` at a time) never queue the small
reads (what is new since a seq, a record, a page of the list) behind them either. The
event loop is never blocked, and a cancelled caller still lets the running transaction
finish (threads are not abandoned), so no write is half-done. A forked child (e.g. a
server worker) opens its own connections instead of the parent's.

A session is owned by one process at a time while it runs a turn: `claim(session_id)`
holds that session's OS file lock (`ownership.py`). Signals for a turn another process runs
(steer, follow-up, cancel; `runtime/agent_sessions/signals.py`) are rows of a `signals`
table: `publish` inserts one, `listen` polls for new rows every `SIGNAL_POLL_S` (that is the
bound on their latency) while this process holds a claim, and is parked while it holds
none (`signal_demand.py`: no turn here could use one), and rows older than a minute are
deleted. Schema changes are
migrations keyed on `PRAGMA user_version`; a file from a newer build is refused rather than altered.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, TypeVar, overload

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge.adapters.storage.appending import check_batch
from steerable_bridge.adapters.storage.cursor import decode_cursor, encode_cursor
from steerable_bridge.adapters.storage.decoding import decode_entries, decode_rows, plain_rows
from steerable_bridge.adapters.storage.formats import (
    FORMAT,
    Row,
    decode_record,
    format_too_new,
    history_compaction,
)
from steerable_bridge.adapters.storage.ownership import OwnerLocks
from steerable_bridge.adapters.storage.readiness import SQLITE_SCHEMA_VERSION
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.request_writer import RequestWriter, resume_writer
from steerable_bridge.adapters.storage.signal_demand import SignalDemand
from steerable_bridge.adapters.storage.sql import (
    ADOPT,
    ADOPT_ROW,
    FETCH_BLOCK,
    INSERT_EVENT,
    INSERT_SESSION,
    READ_AFTER,
    SESSION_ROW,
    TAIL_COMPACTION,
    TAIL_FACTS,
    TAIL_FROM,
    TAIL_RUN_START,
    UPDATE_AFTER_APPEND,
    adopted_row,
    event_rows,
    fetch_rows,
    list_query,
    session_row,
    update_after_append,
)
from steerable_bridge.adapters.storage.store_threads import StoreThreads
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.agent_sessions.signals import (
    SessionSignal,
    signal_from_json,
    signal_to_json,
)
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionPage,
    SessionRecord,
    StoreError,
    storage_full,
    tail_start,
)
from steerable_bridge.runtime.session_log.delta_runs import Entry

__all__ = ["SCHEMA_VERSION", "SIGNAL_POLL_S", "SqliteStore", "store_error"]

log = logging.getLogger(__name__)

T = TypeVar("T")

log = logging.getLogger(__name__)

SCHEMA_VERSION = SQLITE_SCHEMA_VERSION
"""`PRAGMA user_version` of the tables below (kept in `readiness.py`, which checks it at
start-up without importing this module)."""

SIGNAL_POLL_S = 0.05
"""How often a listening process looks for new signals."""
READERS = 3
"""Reader connections per process (reads at once; the writer is one more)."""
THREADS = 1 + READERS + 1
"""Threads per process: the writer's, the readers', and the signal poll's."""
WHOLE_LOG_READERS = 1
"""Of those, how many may read a whole log (or tail) at once: such reads take turns, first
come first served (so the first thread asked for is the first loaded, and their decoding
does not crowd the event loop out), while reads of what is new, records and listings use
the others and never wait behind them."""

_SIGNALS = """
CREATE TABLE IF NOT EXISTS signals (
    id INTEGER PRIMARY KEY,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
)
"""
"""Not part of the versioned schema: a build that does not know it ignores it."""

_USERS = """
ALTER TABLE sessions ADD COLUMN user_id TEXT;
CREATE INDEX sessions_by_user ON sessions (user_id, updated_at DESC, session_id DESC)
"""
"""Schema 1 to 2: who created each session (`SessionRecord.user`)."""

_SCHEMA = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    title TEXT,
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT -1,
    format INTEGER,
    data TEXT NOT NULL,
    user_id TEXT
);
CREATE INDEX sessions_by_update ON sessions (updated_at DESC, session_id DESC);
CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, session_id DESC);
CREATE INDEX sessions_by_user ON sessions (user_id, updated_at DESC, session_id DESC);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT NOT NULL,
    ts INTEGER NOT NULL,
    facts INTEGER NOT NULL,
    format INTEGER,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX events_by_seq ON events (session_id, seq);
CREATE INDEX events_by_kind ON events (session_id, kind, seq);
CREATE INDEX events_with_facts ON events (session_id, seq) WHERE facts = 1;
"""


def store_error(path: Path, err: sqlite3.Error) -> StoreError:
    """A StoreError naming the remedy for an sqlite3 failure on the store at `path`."""
    text = str(err)
    if getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in text:
        return storage_full(str(path), text)
    if isinstance(err, sqlite3.OperationalError) and "locked" in text:
        return StoreError(
            "store_busy",
            f"{path} stayed locked by another process ({text}); retry, or find the process"
            " holding it",
        )
    if isinstance(err, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return StoreError(
            "store_corrupt",
            f"{path} is damaged ({text}); run `steerable-bridge sessions check --storage"
            f" {path}` to see what is readable and `sessions export ID` to salvage sessions,"
            " then move the file aside",
        )
    return StoreError(
        "store_unavailable", f"cannot use the session store {path} ({text}); check the path"
    )


class SqliteStore:
    """Sessions in one SQLite file. Open lazily on first use; `close()` when done."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.owners = OwnerLocks(self.path.with_name(self.path.name + "-owners"))
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        """Guards the connections' bookkeeping (never held while a statement runs)."""
        self._write_lock = threading.Lock()
        """Held while the writer connection is in use (one caller at a time)."""
        self._limiter: anyio.CapacityLimiter | None = None
        self._threads = StoreThreads(THREADS, "sqlite-store")
        """Where every call runs (`store_threads.py`): started at the first, kept for good."""
        self._readers: list[sqlite3.Connection] = []
        """Idle reader connections (taken and put back under `_lock`)."""
        self._read_limiter: anyio.CapacityLimiter | None = None
        self._whole_limiter: anyio.CapacityLimiter | None = None
        self._opened = False
        """Whether the writer connection opened (migrated) the file in this process."""
        self._demand = SignalDemand()
        """The claims this process holds: `listen` polls only while there are some."""
        self._writers: IdleCache[str, RequestWriter] = IdleCache(capacity=256, ttl_s=3600)
        """Each session's `RequestWriter`: its next model request is stored by reference."""

    # -- plumbing ---------------------------------------------------------------------------

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` with the writer connection in this thread (opening it first if needed)."""
        with self._write_lock:
            with self._lock:
                self._forked()
                if self._conn is None:
                    self._conn = self._opening(self._open)
                    self._opened = True
                conn = self._conn
            return self._calling(fn, conn)

    def read_call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` (which only reads) with a reader connection of the pool in this thread;
        other readers and the writer go on meanwhile."""
        with self._lock:
            self._forked()
            conn = self._readers.pop() if self._readers else None
            pid, opened = self._pid, self._opened
        if not opened:  # the writer creates and migrates the file first
            self.call(lambda conn: None)
        if conn is None:
            conn = self._opening(self._open_reader)
        try:
            return self._calling(fn, conn)
        finally:
            with self._lock:
                if pid == self._pid and self._opened and len(self._readers) < READERS:
                    self._readers.append(conn)
                else:  # closed or forked meanwhile
                    conn.close()

    def _forked(self) -> None:
        """In a forked child: forget (never use) the parent's connections. Under `_lock`."""
        if self._pid != os.getpid():
            self._conn, self._pid, self._readers, self._opened = None, os.getpid(), [], False

    def _opening(self, open_: Callable[[], sqlite3.Connection]) -> sqlite3.Connection:
        try:
            return open_()
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise storage_full(str(self.path), str(err)) from None
            raise StoreError(
                "store_unavailable",
                f"cannot create the session store {self.path} ({err}); check the path",
            ) from None
        except sqlite3.Error as err:
            log.warning("cannot open the session store %s: %s", self.path, err)
            raise store_error(self.path, err) from None

    def _calling(self, fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
        try:
            return fn(conn)
        except sqlite3.Error as err:
            error = store_error(self.path, err)
            expected = error.code in ("storage_full", "store_busy")  # not a bug: no trace
            log.warning("session store %s: %s", self.path, err, exc_info=not expected)
            raise error from None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._limiter is None or self._pid != os.getpid():
            self._limiter = anyio.CapacityLimiter(1)
        async with self._limiter:
            return await self._threads.run(self.call, fn)

    async def _read(self, fn: Callable[[sqlite3.Connection], T], *, whole: bool = False) -> T:
        """`_run` for a call that only reads: on the reader pool (`whole`: it reads a whole
        log or tail, in the `WHOLE_LOG_READERS` lane)."""
        if self._read_limiter is None or self._pid != os.getpid():
            self._read_limiter = anyio.CapacityLimiter(READERS - WHOLE_LOG_READERS)
            self._whole_limiter = anyio.CapacityLimiter(WHOLE_LOG_READERS)
        limiter = self._whole_limiter if whole else self._read_limiter
        async with limiter:  # type: ignore[union-attr]
            return await self._threads.run(self.read_call, fn)

    def _open_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA query_only = 1")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._enter_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate(conn)
            conn.execute(_SIGNALS)
        except BaseException:
            conn.close()
            raise
        return conn

    def _enter_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL, waiting (up to the busy timeout) for another opener.

        SQLite answers `PRAGMA journal_mode = WAL` with "database is locked" at once, without
        calling the busy handler, while another process holds the file during its own first
        open (seen with two agents started together on a new store), so the switch is retried
        here with a short backoff instead.
        """
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                "store_too_new",
                f"{self.path} was created by a newer steerable-bridge (schema {version}; this"
                f" build knows {SCHEMA_VERSION}); upgrade steerable-bridge to use it",
            )
        with _transaction(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version == 1:  # 2 adds each session's user; old rows have none
                for statement in _USERS.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._write_lock, self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for conn in self._readers:
                conn.close()
            self._readers = []
            self._opened = False
        self._threads.close()

    async def aclose(self) -> None:
        await self._run(lambda conn: None)
        self.close()

    def shed_idle(self) -> int:
        """Close the connections nobody uses now (the idle readers, and the writer unless a
        call holds it); the next call opens them again. Returns how many were closed.

        A connection gathers, while a burst of runs uses it, things that last as long as it
        does: SQLite's page cache (up to ~2 MB, in malloc's heap of the worker thread that
        read), the statement cache, and the list of weak references to every cursor made
        since that list was last pruned (CPython prunes it once per 200 cursors), small
        objects scattered through the memory the burst used, each keeping a 1 MiB arena of
        CPython's allocator from going back. `serve` calls this once a burst has settled
        (`commands/heap.py`); the file stays open in the other connections, and reopening
        one costs a few PRAGMAs."""
        with self._lock:
            self._forked()
            idle, self._readers = self._readers, []
        if self._write_lock.acquire(blocking=False):
            try:
                with self._lock:
                    self._forked()
                    writer, self._conn = self._conn, None
                if writer is not None:
                    idle.append(writer)
            finally:
                self._write_lock.release()
        for conn in idle:
            conn.close()
        return len(idle)

    # -- the SessionStore port --------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        def create(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(INSERT_SESSION, session_row(record))
            except sqlite3.IntegrityError:
                raise StoreError(
                    "session_exists",
                    f"session {record.session_id} already exists; pick another id",
                ) from None

        await self._run(create)

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
        rows = event_rows(session_id, batch, writer)

        def append(conn: sqlite3.Connection) -> None:
            with _transaction(conn):
                row = conn.execute(SESSION_ROW, (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFound(session_id)
                last, found, data = row
                record = decode_record(session_id, found, data)
                title = check_batch(session_id, last, batch, record.title)
                if not batch:
                    return
                conn.executemany(INSERT_EVENT, rows)
                conn.execute(UPDATE_AFTER_APPEND, update_after_append(record, batch, title))

        await self._run(append)  # a failed append forgets the writer: it saw rows not stored
        self._writers.put(session_id, writer)
        self._writers.sweep(lambda _: True)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        def read(conn: sqlite3.Connection) -> tuple[list[LoopEvent], int]:
            with _transaction(conn, write=False):
                last = _require(conn, session_id)
                rows = conn.execute(READ_AFTER, (session_id, after_seq)).fetchall()
                return _decode_all(conn, session_id, rows, after_seq + 1), last

        events, last = await self._read(read, whole=after_seq < 0)
        resume_writer(self._writers, session_id, events, last)  # a reload: see request_writer.py
        return events

    async def read_tail(self, session_id: str) -> list[LoopEvent]:
        """From the run holding the newest compaction on, after the fact-carrying events."""

        def read_tail(conn: sqlite3.Connection) -> tuple[list[LoopEvent], int]:
            with _transaction(conn, write=False):
                last = _require(conn, session_id)
                start = _tail_start(conn, session_id)
                rows = conn.execute(TAIL_FACTS, (session_id, start)).fetchall()
                rows += conn.execute(TAIL_FROM, (session_id, start)).fetchall()
                return _decode_all(conn, session_id, rows, start), last

        events, last = await self._read(read_tail, whole=True)
        resume_writer(self._writers, session_id, events, last)
        return events

    async def read_tail_entries(self, session_id: str) -> list[Entry]:
        """`read_tail` with each run row as the `DeltaRun` a log holds in memory
        (`runtime/session_log/delta_runs.py`): a message's deltas are never built one by one."""

        def read_tail(conn: sqlite3.Connection) -> tuple[list[Entry], int]:
            with _transaction(conn, write=False):
                last = _require(conn, session_id)
                start = _tail_start(conn, session_id)
                rows = conn.execute(TAIL_FACTS, (session_id, start)).fetchall()
                rows += conn.execute(TAIL_FROM, (session_id, start)).fetchall()
                return _decode_all(conn, session_id, rows, start, runs=True), last

        entries, last = await self._read(read_tail, whole=True)
        resume_writer(self._writers, session_id, entries, last)
        return entries

    async def get(self, session_id: str) -> SessionRecord | None:
        def get(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(
                "SELECT format, data FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            return None if row is None else decode_record(session_id, row[0], row[1])

        return await self._read(get)

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

        def list_(conn: sqlite3.Connection) -> SessionPage:
            sql, params = list_query(cwd, after, limit, user)
            rows = conn.execute(sql, params).fetchall()
            records = tuple(
                SessionRecord(
                    session_id=sid,
                    cwd=where_,
                    title=title,
                    model=model,
                    created_at=created,
                    updated_at=updated,
                    user=owner,
                )
                for sid, where_, title, model, created, updated, owner in rows[:limit]
            )
            more = len(rows) > limit and records
            return SessionPage(
                records=records, next_cursor=encode_cursor(records[-1]) if more else None
            )

        return await self._read(list_)

    async def adopt(self, session_id: str, user: str) -> bool:
        """Give a session stored without an owner to `user` (`storage.adopt_session`)."""

        def adopt(conn: sqlite3.Connection) -> bool:
            with _transaction(conn):
                row = conn.execute(ADOPT_ROW, (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFound(session_id)
                found, data, owner = row
                if owner is not None:
                    return bool(owner == user)
                record = decode_record(session_id, found, data)
                conn.execute(ADOPT, adopted_row(record, user))
                return True

        return await self._run(adopt)

    async def delete(self, session_id: str) -> bool:
        """Remove a session; raises SessionOwned while another process runs a turn in it."""
        held = self.owners.acquire(session_id)
        deleted = False
        try:

            def delete(conn: sqlite3.Connection) -> bool:
                with _transaction(conn):
                    conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
                    gone = conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
                    return gone.rowcount > 0

            deleted = await self._run(delete)
        finally:
            held.release(unlink=deleted)
        return deleted

    @asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        """Own the session while a turn runs; raises SessionOwned naming the owner."""
        async with self._demand.claiming():  # the listeners take their mark before the lock
            held = self.owners.acquire(session_id)
            try:
                yield
            finally:
                held.release()

    async def publish(self, signal: SessionSignal) -> None:
        """Leave a signal for the listening processes (see the module docstring)."""
        data = signal_to_json(signal)
        now = int(time.time() * 1000)

        def publish(conn: sqlite3.Connection) -> None:
            with _transaction(conn):
                conn.execute("INSERT INTO signals (data, created_at) VALUES (?, ?)", (data, now))
                conn.execute("DELETE FROM signals WHERE created_at < ?", (now - 60_000,))

        await self._run(publish)

    async def listen(
        self,
        deliver: Callable[[SessionSignal], object],
        *,
        task_status: TaskStatus[None] = TASK_STATUS_IGNORED,
    ) -> None:
        """Deliver every signal published while this process holds a claim, polling every
        `SIGNAL_POLL_S` (`claim` waits until the poll has its mark: every signal published
        once another process can see the claim is delivered). While it holds none, no turn
        here could use a signal: the poll parks (`signal_demand.py`), and the signals
        published meanwhile are skipped when it resumes.

        The poll has a connection and a cursor of its own, opened before it first looks and
        kept while it listens (`shed_idle` never closes it). Through the shared connections
        it made a new cursor 20 times a second, each leaving a weak reference in its
        connection until CPython prunes them (once per 200), and it reopened the connection
        `shed_idle` had just closed: small objects made after a burst, in the memory the
        burst used, keeping that memory's arenas from going back to the system."""
        await self._run(lambda conn: None)  # the writer creates and migrates the file first
        poll = await self._threads.run(self._opening, self._open_reader)
        try:
            cursor = poll.cursor()

            def newest(_: sqlite3.Connection) -> int:
                row = cursor.execute("SELECT coalesce(max(id), 0) FROM signals").fetchone()
                return int(row[0])

            def newer(_: sqlite3.Connection) -> list[tuple[int, str]]:
                rows = cursor.execute(
                    "SELECT id, data FROM signals WHERE id > ? ORDER BY id", (last,)
                ).fetchall()
                return [(int(i), str(d)) for i, d in rows]

            async def mark() -> int:
                return await self._threads.run(self._calling, newest, poll)

            last = await mark()
            task_status.started()
            while True:
                parked = self._demand.park()
                if parked is not None:  # no claim here: wait for one, then start at the newest
                    try:
                        await parked.wake
                        last = await mark()
                    finally:
                        self._demand.resumed(parked)
                await anyio.sleep(SIGNAL_POLL_S)
                rows = await self._threads.run(self._calling, newer, poll)
                for last, data in rows:  # noqa: B007 - `last` is where the next poll begins
                    try:
                        signal = signal_from_json(data)
                    except ValueError as err:
                        log.warning("ignored a signal that does not decode: %s", err)
                        continue
                    deliver(signal)
        finally:
            poll.close()

    def owner(self, session_id: str) -> str | None:
        """Who runs a turn in the session now, for display (None when nobody)."""
        return self.owners.holder(session_id)


class _transaction:
    """`BEGIN IMMEDIATE` (or a read snapshot) … `COMMIT`, rolled back on any error."""

    def __init__(self, conn: sqlite3.Connection, *, write: bool = True) -> None:
        self.conn = conn
        self.begin = "BEGIN IMMEDIATE" if write else "BEGIN"

    def __enter__(self) -> None:
        self.conn.execute(self.begin)

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if kind is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


def _require(conn: sqlite3.Connection, session_id: str) -> int:
    """The session's last stored seq; raises SessionNotFound or `format_too_new`."""
    row = conn.execute(
        "SELECT format, last_seq FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    if row[0] is not None and row[0] > FORMAT:
        raise format_too_new(f"session {session_id}", row[0])
    return int(row[1])


def _tail_start(conn: sqlite3.Connection, session_id: str) -> int:
    """The seq a resume reads from (`tail_start` of the newest history compaction)."""
    found = history_compaction(session_id, conn.execute(TAIL_COMPACTION, (session_id,)))
    if found is None:
        return -1
    run = conn.execute(TAIL_RUN_START, (session_id, found.seq)).fetchone()
    return tail_start(found, int(run[0]) if run is not None else found.seq)


@overload
def _decode_all(
    conn: sqlite3.Connection, session_id: str, rows: Sequence[Row], from_seq: int
) -> list[LoopEvent]: ...
@overload
def _decode_all(
    conn: sqlite3.Connection,
    session_id: str,
    rows: Sequence[Row],
    from_seq: int,
    *,
    runs: Literal[True],
) -> list[Entry]: ...
def _decode_all(
    conn: sqlite3.Connection,
    session_id: str,
    rows: Sequence[Row],
    from_seq: int,
    *,
    runs: bool = False,
) -> list[LoopEvent] | list[Entry]:
    """The rows' events from `from_seq` on (runs unfolded); requests stored by reference
    are rebuilt, fetching the rows they refer to that the read did not include (a tail, or
    rows after a seq)."""
    resolver = Resolver(session_id)
    plain = plain_rows(rows)
    while not all(plain):
        need, block = resolver.missing(rows), resolver.block(rows, from_seq)
        if not need and block is None:
            break
        if block is not None:
            found = conn.execute(FETCH_BLOCK, (session_id, *block)).fetchall()
            resolver.extra.update((row[0], row) for row in found)
        seqs = sorted(need - resolver.extra.keys())
        if seqs:
            found = conn.execute(fetch_rows(len(seqs)), (session_id, *seqs)).fetchall()
            resolver.extra.update((row[0], row) for row in found)
            if len(found) < len(seqs):
                absent = min(set(seqs) - {row[0] for row in found})
                raise _missing_row(session_id, absent)
    if runs:
        return decode_entries(resolver, rows, plain, final=True, from_seq=from_seq)
    return decode_rows(resolver, rows, plain, final=True, from_seq=from_seq)


def _missing_row(session_id: str, seq: int) -> StoreError:
    return StoreError(
        "corrupt_record",
        f"session {session_id} refers to event seq {seq}, which is not stored; run"
        " `steerable-bridge sessions check` and `sessions export ID` to salvage the rest",
    )
