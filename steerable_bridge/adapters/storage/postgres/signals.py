"""Steer, follow-up and cancel for a turn another process runs, by LISTEN/NOTIFY.

`publish` sends a `SessionSignal` (`runtime/agent_sessions/signals.py`) as a `NOTIFY
steerable_signals` payload when its JSON fits (`INLINE_LIMIT`; NOTIFY carries < 8000 bytes);
a larger one is stored in the `signals` table and the notification carries `@id` (rows older
than ten minutes are deleted as new ones go in). `listen` keeps one `LISTEN` connection, delivers
every signal to its callback, checks a quiet connection every half minute and reconnects
with a capped backoff after a failure. Delivery takes one round trip through the server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge.adapters.storage.postgres.driver import psycopg, unavailable
from steerable_bridge.runtime.agent_sessions.signals import (
    SessionSignal,
    signal_from_json,
    signal_to_json,
)

if TYPE_CHECKING:
    from steerable_bridge.adapters.storage.postgres.driver import Connection

__all__ = ["CHANNEL", "INLINE_LIMIT", "listen", "publish"]

log = logging.getLogger(__name__)

CHANNEL = "steerable_signals"
INLINE_LIMIT = 7000
"""Signals whose JSON is longer go through the `signals` table (NOTIFY carries < 8000 bytes)."""


async def publish(conn: Connection, signal: SessionSignal) -> None:
    """Send a signal to every listening process."""
    data = signal_to_json(signal)
    if len(data.encode()) <= INLINE_LIMIT:
        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, data))
        return
    async with conn.transaction():
        cur = await conn.execute("INSERT INTO signals (data) VALUES (%s) RETURNING id", (data,))
        row = await cur.fetchone()
        assert row is not None
        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"@{row[0]}"))
        await conn.execute("DELETE FROM signals WHERE created_at < now() - interval '10 minutes'")


async def listen(
    where: str,
    connect: Callable[[], Awaitable[Connection]],
    pooled: Callable[[], AbstractAsyncContextManager[Connection]],
    deliver: Callable[[SessionSignal], object],
    *,
    task_status: TaskStatus[None] = TASK_STATUS_IGNORED,
) -> None:
    """Deliver every published signal until cancelled, reconnecting after failures;
    reports itself started once it listens. `connect` opens the listening connection;
    `pooled` lends one to read a large signal from the table."""
    delay = 0.5
    started = False
    while True:
        try:
            conn = await connect()
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                if not started:
                    started = True
                    task_status.started()
                delay = 0.5
                while True:
                    async for note in conn.notifies(timeout=30.0):
                        signal = await _signal_of(pooled, note.payload)
                        if signal is not None:
                            deliver(signal)
                    await conn.execute("SELECT 1")  # a quiet half minute: still there?
        except psycopg.Error as err:
            if not started:
                raise unavailable(where, err) from None
            log.warning(
                "listening for signals on %s failed (%s); retrying in %gs", where, err, delay
            )
        await anyio.sleep(delay)
        delay = min(delay * 2, 10.0)


async def _signal_of(
    pooled: Callable[[], AbstractAsyncContextManager[Connection]], payload: str
) -> SessionSignal | None:
    """The signal a notification carries (a large one is read from the table through the
    pool: the listening connection is busy iterating its notifications)."""
    try:
        if payload.startswith("@"):
            async with pooled() as conn:
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
