"""A full disk under the session store, as an AG-UI client meets it: the run ends with one
RUN_ERROR coded `storage_full` (with the remedy), a later run is refused with 507 and the
same code while the disk is full, and once space is freed the thread carries on and loads
whole — nothing half-written. The disk fills for real at the SQLite layer: `PRAGMA
max_page_count` at the database's current size makes SQLite answer "database or disk is
full", as it does on a full disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import make_agent
from tests.transports.agui.harness import asgi_client, post, run_input, types, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BIG = "a long paste that needs new pages in the database. " * 4000


def _fill(store: SqliteStore) -> None:
    """No page beyond those the database has now: every write that needs one fails."""

    def limit(conn: sqlite3.Connection) -> None:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")

    store.call(limit)


def _free(store: SqliteStore) -> None:
    store.call(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))


async def test_a_full_disk_is_storage_full_and_the_thread_survives(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    store = SqliteStore(db)
    app = create_app(LocalPort(make_agent(DemoProvider(pace_ms=0), store=store)))  # type: ignore[arg-type]
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hello")]))
        assert types(first)[-1] == "RUN_FINISHED"
        _fill(store)
        messages = [user("u1", "hello"), user("u2", BIG)]
        _, full = await post(client, run_input("t1", "r2", messages))
        refused, _ = await post(client, run_input("t1", "r3", [*messages, user("u3", "again")]))
        _free(store)
        _, after = await post(
            client, run_input("t1", "r4", [*messages, user("u3", "again"), user("u4", "ok?")])
        )
    assert types(full).count("RUN_ERROR") == 1 and "RUN_FINISHED" not in types(full)
    assert full[-1]["type"] == "RUN_ERROR" and full[-1]["code"] == "storage_full"
    assert "free some space" in full[-1]["message"]
    # while the disk stays full, the next run is refused before a stream begins
    assert refused.status_code == 507
    assert refused.json()["error"]["code"] == "storage_full"
    assert types(after)[-1] == "RUN_FINISHED"

    reopened = SqliteStore(db)  # what another process (or a restart) loads
    try:
        events = await reopened.read("t1")
    finally:
        reopened.close()
    assert [e.seq for e in events] == list(range(len(events)))  # whole, in order
    ends = [e for e in events if isinstance(e, ev.RunFinished | ev.RunFailed)]
    assert [type(e).__name__ for e in ends] == ["RunFinished", "RunFailed", "RunFinished"]
    failed = ends[1]
    assert isinstance(failed, ev.RunFailed) and failed.code == "storage_full"
    said = [
        "".join(getattr(p, "text", "") for p in e.content)
        for e in events
        if isinstance(e, ev.UserMessage)
    ]
    assert said[0] == "hello" and said[1] == BIG and said[-1] == "ok?"  # nothing lost
    assert project_history(events)[-1].role == "assistant"  # and the thread answers on
