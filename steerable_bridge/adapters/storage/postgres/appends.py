"""Appending a batch of events to a session's log in PostgreSQL, in one statement.

One round trip per batch, whatever its size: a data-modifying `WITH` updates the session's
row — only if its stored last seq is below the batch's first seq and its record is not
from a newer build — and inserts the batch's rows from arrays (`unnest`) only if that
update happened. The update's row lock serialises concurrent appends to one session: a
second writer waits for the first and then finds the seq condition false, so nothing of
its batch is written. When nothing was written, one more query says why: no such session,
a record from a newer build (`format_too_new`), or a seq at or below the stored one
(`seq_conflict`, `appending.py`). Seqs within the batch are checked before sending and the
rows are built beforehand (`sql.event_rows`); the columns travel packed in a few binary
text parameters (see `APPEND`), so no JSON is escaped or parsed on the way and psycopg
dumps no per-row values. The session record's JSON is rebuilt in SQL from its columns,
with the keys `formats.encode_record` writes (a test compares the two).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from steerable_bridge.adapters.storage.appending import check_batch
from steerable_bridge.adapters.storage.formats import FORMAT as RECORD_FORMAT
from steerable_bridge.adapters.storage.formats import format_too_new
from steerable_bridge.adapters.storage.postgres.driver import psycopg
from steerable_bridge.adapters.storage.sql import EVENT_COLUMNS, EventRow
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.storage import SessionNotFound, StoreError

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

__all__ = ["APPEND", "append_rows"]

APPEND = f"""
WITH session AS (
    UPDATE sessions SET
        title = COALESCE(%(title)s, title),
        updated_at = %(ts)s,
        last_seq = %(last)s,
        format = %(format)s,
        data = json_build_object(
            'session_id', session_id, 'cwd', cwd, 'created_at', created_at,
            'updated_at', %(ts)s::bigint, 'title', COALESCE(%(title)s, title), 'model', model,
            'user', user_id
        )::text
    WHERE session_id = %(session)s AND last_seq < %(first)s
        AND COALESCE(format, 0) <= %(format)s
    RETURNING session_id
)
INSERT INTO events ({EVENT_COLUMNS})
SELECT session.session_id, e.seq, (%(names)b::text[])[e.kind], (%(names)b::text[])[e.run_id],
    e.ts, e.facts, %(format)s, e.data
FROM session, unnest(
    string_to_array(%(seqs)b, ',')::bigint[],
    string_to_array(%(kinds)b, ',')::int[],
    string_to_array(%(runs)b, ',')::int[],
    string_to_array(%(tss)b, ',')::bigint[],
    string_to_array(%(facts)b, NULL)::smallint[],
    string_to_array(%(datas)b, E'\\x1e')
) AS e (seq, kind, run_id, ts, facts, data)
"""
"""The whole append: the session row's update and the batch's rows, or neither.

The columns travel packed, not as arrays of Python values, which psycopg would dump one
element at a time: numbers as comma-separated text, facts as a string of 0s and 1s, kind
and run id as 1-based positions in `names` (the batch's few distinct strings), and the
event JSON texts joined by the record separator U+001E, which JSON text never holds raw
(control characters inside strings are escaped). Were one to hold it, the split would
yield a row more than the others, whose NULL columns the table refuses: the append fails
whole, nothing is misfiled."""

_RECORD_SEPARATOR = "\x1e"


def _packed(rows: Sequence[EventRow]) -> dict[str, object]:
    """The `APPEND` parameters that carry the rows' columns."""
    position: dict[str, int] = {}
    for row in rows:
        position.setdefault(row[2], len(position) + 1)
        position.setdefault(row[3], len(position) + 1)
    return {
        "names": list(position),
        "seqs": ",".join([str(row[1]) for row in rows]),
        "kinds": ",".join([str(position[row[2]]) for row in rows]),
        "runs": ",".join([str(position[row[3]]) for row in rows]),
        "tss": ",".join([str(row[4]) for row in rows]),
        "facts": "".join(["1" if row[5] else "0" for row in rows]),
        "datas": _RECORD_SEPARATOR.join([row[7] for row in rows]),
    }


async def append_rows(
    conn: Connection, session_id: str, batch: Sequence[LoopEvent], rows: Sequence[EventRow]
) -> None:
    """Append `batch` (stored as `rows`) to the session, or raise without writing."""
    if not batch:
        await _refusal(conn, session_id, batch)
        return
    title = check_batch(session_id, batch[0].seq - 1, batch, None)  # rising within the batch
    params = {
        "session": session_id,
        "first": batch[0].seq,
        "last": batch[-1].seq,
        "ts": batch[-1].ts,
        "title": title,
        "format": RECORD_FORMAT,
        **_packed(rows),
    }
    try:
        cur = await conn.execute(APPEND, params)
    except psycopg.errors.UniqueViolation:
        raise _conflict(session_id, batch[0].seq) from None
    if cur.rowcount != len(rows):  # fewer rows than events: runs of deltas, `runs.py`
        await _refusal(conn, session_id, batch)
        raise _conflict(session_id, batch[0].seq)


async def _refusal(conn: Connection, session_id: str, batch: Sequence[LoopEvent]) -> None:
    """Raise why the session takes no batch (no such session, a newer record, a seq at or
    below the stored one); return if it would take this one."""
    cur = await conn.execute(
        "SELECT last_seq, format FROM sessions WHERE session_id = %s", (session_id,)
    )
    row = await cur.fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    last, found = row
    if found is not None and found > RECORD_FORMAT:
        raise format_too_new(f"the record of session {session_id}", found)
    check_batch(session_id, last, batch, None)


def _conflict(session_id: str, seq: int) -> StoreError:
    return StoreError(
        "seq_conflict",
        f"event seq {seq} was stored in session {session_id} meanwhile; another process may"
        " be writing it",
    )
