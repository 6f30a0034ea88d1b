"""The SQL both durable stores share: one row layout, one tail rule, one listing query.

The SQLite (`sqlite.py`) and PostgreSQL (`postgres.py`) stores keep the same two tables —
`sessions` (one row per session: indexed columns plus its record JSON) and `events` (one
row per LoopEvent — or per run of streamed deltas, `runs.py`: session id, seq, kind, run id,
ts, a fact-carrying flag, the record format and the event's body, `formats.py`) — so the
rows are built here once (`event_rows`, `appended_record`), every read selects
`ROW_COLUMNS`, and the queries are
written once in SQLite's `?` style; PostgreSQL takes them through `pg()`, which switches the
placeholders to `%s`. The resume tail rule (start at the run holding the newest
`compaction`, after the fact-carrying events) lives in `TAIL_*`. Nothing here opens a
connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from steerable_bridge.adapters.storage.formats import FORMAT, encode_record
from steerable_bridge.adapters.storage.request_writer import RequestWriter
from steerable_bridge.adapters.storage.runs import encode_run, fold
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.model_context.projection import carries_facts
from steerable_bridge.runtime.ports.storage import SessionRecord

__all__ = [
    "ADOPT",
    "ADOPT_ROW",
    "EVENT_COLUMNS",
    "FETCH_BLOCK",
    "INSERT_EVENT",
    "INSERT_SESSION",
    "READ_AFTER",
    "ROW_COLUMNS",
    "SESSION_ROW",
    "TAIL_COMPACTION",
    "TAIL_FACTS",
    "TAIL_FROM",
    "TAIL_RUN_START",
    "UPDATE_AFTER_APPEND",
    "EventRow",
    "adopted_row",
    "appended_record",
    "event_rows",
    "fetch_rows",
    "list_query",
    "pg",
    "session_row",
    "update_after_append",
]

EventRow = tuple[str, int, str, str, int, int, int, str]

EVENT_COLUMNS = "session_id, seq, kind, run_id, ts, facts, format, data"
"""The columns `event_row` fills, in its order."""

INSERT_SESSION = (
    "INSERT INTO sessions"
    " (session_id, cwd, title, model, created_at, updated_at, format, data, user_id)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SESSION_ROW = "SELECT last_seq, format, data FROM sessions WHERE session_id = ?"
ADOPT_ROW = "SELECT format, data, user_id FROM sessions WHERE session_id = ?"
ADOPT = (
    "UPDATE sessions SET user_id = ?, format = ?, data = ? WHERE session_id = ? AND user_id IS NULL"
)
"""A session stored without an owner given to one (`adopt`): the column lists filter on and
the record's JSON, which `get` reads, change together; an owned session is left alone."""
UPDATE_AFTER_APPEND = (
    "UPDATE sessions SET title = ?, updated_at = ?, last_seq = ?, format = ?, data = ?"
    " WHERE session_id = ?"
)
INSERT_EVENT = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
ROW_COLUMNS = "seq, format, kind, run_id, ts, data"
"""What every read selects: a `formats.Row`."""
READ_AFTER = f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
TAIL_COMPACTION = (
    f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND kind = 'compaction'"
    " ORDER BY seq DESC"
)
"""Compactions newest first; the tail starts at the first of scope `history`
(`formats.history_compaction`)."""
TAIL_RUN_START = (
    "SELECT seq FROM events WHERE session_id = ? AND kind = 'run_started' AND seq <= ?"
    " ORDER BY seq DESC LIMIT 1"
)
TAIL_FACTS = (
    f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND facts = 1 AND seq < ? ORDER BY seq"
)
TAIL_FROM = f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq"


def pg(sql: str) -> str:
    """The query with PostgreSQL's placeholders (no query here holds a literal `?`)."""
    return sql.replace("?", "%s")


def event_rows(
    session_id: str, batch: Sequence[LoopEvent], writer: RequestWriter
) -> list[EventRow]:
    """The `events` rows of a batch (columns in `EVENT_COLUMNS` order); `writer` is the
    session's, and stores model requests by reference (`request_writer.py`). Consecutive
    deltas of one message take one row, a run keyed by its last delta (`runs.py`)."""
    rows: list[EventRow] = []
    for item in fold(batch):
        if isinstance(item, tuple):
            for delta in item:
                writer.note(delta)
            last = item[-1]
            rows.append(
                (session_id, last.seq, last.kind, last.run_id, last.ts, 0, FORMAT, encode_run(item))
            )
            continue
        rows.append(
            (
                session_id,
                item.seq,
                item.kind,
                item.run_id,
                item.ts,
                1 if carries_facts(item) else 0,
                FORMAT,
                writer.body(item),
            )
        )
    return rows


FETCH_BLOCK = (
    f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
)
"""Every row from one seq to another: the events of assistant messages that requests a read
included refer to, from before the read (`request_resolver.Resolver.block`)."""


def fetch_rows(count: int) -> str:
    """`count` rows by seq (parameters: the session id, then the seqs): rows that requests
    stored by reference need and a read did not include."""
    marks = ", ".join("?" * count)
    return (
        f"SELECT {ROW_COLUMNS} FROM events WHERE session_id = ? AND seq IN ({marks}) ORDER BY seq"
    )


def session_row(record: SessionRecord) -> tuple[object, ...]:
    """The `INSERT_SESSION` parameters of a new session."""
    return (
        record.session_id,
        record.cwd,
        record.title,
        record.model,
        record.created_at,
        record.updated_at,
        FORMAT,
        encode_record(record),
        record.user,
    )


def adopted_row(record: SessionRecord, user: str) -> tuple[object, ...]:
    """The `ADOPT` parameters giving `record`'s session to `user`."""
    return (user, FORMAT, encode_record(replace(record, user=user)), record.session_id)


def update_after_append(
    record: SessionRecord, batch: Sequence[LoopEvent], title: str | None
) -> tuple[object, ...]:
    """The `UPDATE_AFTER_APPEND` parameters once a non-empty batch is in."""
    updated = appended_record(record, batch, title)
    return (
        title,
        updated.updated_at,
        batch[-1].seq,
        FORMAT,
        encode_record(updated),
        record.session_id,
    )


def appended_record(
    record: SessionRecord, batch: Sequence[LoopEvent], title: str | None
) -> SessionRecord:
    """The session's record after a non-empty batch: its title, updated at the last event."""
    return SessionRecord(
        session_id=record.session_id,
        cwd=record.cwd,
        created_at=record.created_at,
        updated_at=batch[-1].ts,
        title=title,
        model=record.model,
        user=record.user,
    )


def list_query(
    cwd: str | None, after: tuple[int, str] | None, limit: int, user: str | None = None
) -> tuple[str, list[object]]:
    """Newest first, optionally in one cwd or of one user, strictly after a cursor; one row
    over `limit` tells the caller there is a next page."""
    where: list[str] = []
    params: list[object] = []
    if cwd is not None:
        where.append("cwd = ?")
        params.append(cwd)
    if user is not None:
        where.append("user_id = ?")
        params.append(user)
    if after is not None:
        where.append("(updated_at, session_id) < (?, ?)")
        params.extend(after)
    sql = "SELECT session_id, cwd, title, model, created_at, updated_at, user_id FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY updated_at DESC, session_id DESC LIMIT ?"
    params.append(limit + 1)
    return sql, params
