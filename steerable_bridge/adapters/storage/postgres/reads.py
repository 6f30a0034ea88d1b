"""Reading sessions back from PostgreSQL: whole logs, the resume tail, records, the check.

A log is read in seq order and decoded through the record-format rules (`formats.py`): a
request stored by reference is rebuilt (`request_resolver.py`), fetching the rows it refers to
when the read did not include them (a tail, or rows after a seq). The resume tail (`read_tail`,
the rule in `sql.py`'s `TAIL_*`) is read in one REPEATABLE READ snapshot, so an append
landing between its queries cannot split it. `check` verifies every row as `sessions
check` does for SQLite and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from steerable_bridge.adapters.storage.decoding import decode_entries, decode_rows, plain_rows
from steerable_bridge.adapters.storage.formats import FORMAT as RECORD_FORMAT
from steerable_bridge.adapters.storage.formats import (
    decode_record,
    format_too_new,
    history_compaction,
)
from steerable_bridge.adapters.storage.integrity import CheckReport, check_log, salvaged
from steerable_bridge.adapters.storage.postgres.driver import pipelined
from steerable_bridge.adapters.storage.postgres.schema import SCHEMA_VERSION, stored_version
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.sql import (
    FETCH_BLOCK,
    READ_AFTER,
    ROW_COLUMNS,
    TAIL_COMPACTION,
    TAIL_FACTS,
    TAIL_FROM,
    TAIL_RUN_START,
    fetch_rows,
    pg,
)
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionRecord,
    StoreError,
    tail_start,
)
from steerable_bridge.runtime.session_log.delta_runs import Entry

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

__all__ = ["check", "get_record", "read_after", "read_tail", "read_tail_entries"]


_SESSION_FORMAT = "SELECT format, last_seq FROM sessions WHERE session_id = %s"


def _required(session_id: str, row: tuple[int | None, int] | None) -> int:
    """The session's last stored seq, given its `_SESSION_FORMAT` row; raises
    SessionNotFound, or format_too_new for a session from a newer build."""
    if row is None:
        raise SessionNotFound(session_id)
    if row[0] is not None and row[0] > RECORD_FORMAT:
        raise format_too_new(f"session {session_id}", row[0])
    return int(row[1])


async def decode_all(
    conn: Connection, session_id: str, rows: list[Any], from_seq: int = 0
) -> list[LoopEvent]:
    """The rows' events from `from_seq` on (runs of deltas unfolded, `runs.py`); requests
    stored by reference are rebuilt, fetching the rows they refer to that the read did not
    include (one query per level of reference)."""
    resolver, plain = await _resolved(conn, session_id, rows, from_seq)
    return decode_rows(resolver, rows, plain, final=True, from_seq=from_seq)


async def decode_all_entries(
    conn: Connection, session_id: str, rows: list[Any], from_seq: int = 0
) -> list[Entry]:
    """`decode_all` with each stored run of deltas kept as one `DeltaRun`."""
    resolver, plain = await _resolved(conn, session_id, rows, from_seq)
    return decode_entries(resolver, rows, plain, final=True, from_seq=from_seq)


async def _resolved(
    conn: Connection, session_id: str, rows: list[Any], from_seq: int
) -> tuple[Resolver, list[bool]]:
    """A resolver holding every row the requests stored by reference in `rows` need, and
    `plain_rows(rows)`."""
    resolver = Resolver(session_id)
    plain = plain_rows(rows)
    while not all(plain):
        need, block = resolver.missing(rows), resolver.block(rows, from_seq)
        if not need and block is None:
            break
        if block is not None:
            cur = await conn.execute(pg(FETCH_BLOCK), (session_id, *block))
            resolver.extra.update((row[0], row) for row in await cur.fetchall())
        seqs = sorted(need - resolver.extra.keys())
        if not seqs:
            continue
        cur = await conn.execute(pg(fetch_rows(len(seqs))), (session_id, *seqs))
        found = await cur.fetchall()
        resolver.extra.update((row[0], row) for row in found)
        if len(found) < len(seqs):
            absent = min(set(seqs) - {row[0] for row in found})
            raise StoreError(
                "corrupt_record",
                f"session {session_id} refers to event seq {absent}, which is not stored;"
                " run `steerable-bridge sessions check`",
            )
    return resolver, plain


async def read_after(
    conn: Connection, session_id: str, after_seq: int
) -> tuple[list[LoopEvent], int]:
    """The session's events after `after_seq`, and its last stored seq as of just before
    they were read (one round trip, pipelined; more only for rows that requests stored by
    reference need)."""
    async with pipelined(conn):
        head = await conn.execute(_SESSION_FORMAT, (session_id,))
        found = await conn.execute(pg(READ_AFTER), (session_id, after_seq))
        last = _required(session_id, await head.fetchone())
        rows = await found.fetchall()
    return await decode_all(conn, session_id, rows, after_seq + 1), last


async def read_tail(conn: Connection, session_id: str) -> tuple[list[LoopEvent], int]:
    """From `tail_start` of the newest history compaction on, after the fact-carrying
    events, in one snapshot, and the session's last stored seq: two round trips when the
    session has no compaction, three when it has (pipelined), more only for rows that
    requests stored by reference need."""
    async with pipelined(conn), conn.transaction():
        rows, start, last = await _tail_rows(conn, session_id)
        return await decode_all(conn, session_id, rows, start), last


async def read_tail_entries(conn: Connection, session_id: str) -> tuple[list[Entry], int]:
    """`read_tail` with each stored run of deltas as one `DeltaRun`, as a log holds it in
    memory: a load builds no event per token."""
    async with pipelined(conn), conn.transaction():
        rows, start, last = await _tail_rows(conn, session_id)
        return await decode_all_entries(conn, session_id, rows, start), last


async def _tail_rows(conn: Connection, session_id: str) -> tuple[list[Any], int, int]:
    """The tail's rows (inside the caller's transaction), the seq it starts at, and the
    session's last stored seq."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    head = await conn.execute(_SESSION_FORMAT, (session_id,))
    compactions = await conn.execute(pg(TAIL_COMPACTION), (session_id,))
    last = _required(session_id, await head.fetchone())
    found = history_compaction(session_id, await compactions.fetchall())
    rows: list[Any] = []
    start = -1
    if found is not None:
        run = await (await conn.execute(pg(TAIL_RUN_START), (session_id, found.seq))).fetchone()
        start = tail_start(found, int(run[0]) if run is not None else found.seq)
        facts = await conn.execute(pg(TAIL_FACTS), (session_id, start))
    after = await conn.execute(pg(TAIL_FROM), (session_id, start))
    if found is not None:
        rows = await facts.fetchall()
    rows += await after.fetchall()
    return rows, start, last


async def get_record(conn: Connection, session_id: str) -> SessionRecord | None:
    """The session's record, or None."""
    cur = await conn.execute(
        "SELECT format, data FROM sessions WHERE session_id = %s", (session_id,)
    )
    row = await cur.fetchone()
    return None if row is None else decode_record(session_id, row[0], row[1])


async def check(conn: Connection, where: str, *, limit: int = 200) -> CheckReport:
    """Verify every row; changes nothing."""
    report = CheckReport(path=where)
    version = await stored_version(conn)
    if version != SCHEMA_VERSION:
        report.problems.append(
            f"schema version {version}; this build uses {SCHEMA_VERSION}"
            + (" (upgrade steerable-bridge)" if version > SCHEMA_VERSION else "")
        )
        return report
    sessions = await (
        await conn.execute("SELECT session_id, last_seq, format FROM sessions ORDER BY session_id")
    ).fetchall()
    for session_id, last_seq, found in sessions:
        cur = await conn.execute(
            f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = %s ORDER BY seq",
            (session_id,),
        )
        resolver = Resolver(session_id)
        items = [i for row in await cur.fetchall() for i in salvaged(session_id, row, resolver)]
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
