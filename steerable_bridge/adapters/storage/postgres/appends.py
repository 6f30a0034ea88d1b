"""Appending a batch of events to a session's log in PostgreSQL.

The batch goes in as one transaction: the session's row is locked (`FOR UPDATE`), its seqs
are checked against the stored last seq (`appending.py`: a lower one is `seq_conflict`),
the rows are written — through COPY from `COPY_FROM` events on — and the session row gets
its new title, last seq and updated time. Rows are built beforehand (`sql.event_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from steerable_bridge.adapters.storage.appending import check_batch
from steerable_bridge.adapters.storage.formats import decode_record
from steerable_bridge.adapters.storage.sql import (
    EVENT_COLUMNS,
    INSERT_EVENT,
    SESSION_ROW,
    UPDATE_AFTER_APPEND,
    EventRow,
    pg,
    update_after_append,
)
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.storage import SessionNotFound

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

__all__ = ["COPY_FROM", "append_rows"]

COPY_FROM = 16
"""Batches at least this long are written with COPY instead of INSERTs."""


async def append_rows(
    conn: Connection, session_id: str, batch: Sequence[LoopEvent], rows: Sequence[EventRow]
) -> None:
    """Append `batch` (stored as `rows`) to the session, or raise without writing."""
    async with conn.transaction():
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
