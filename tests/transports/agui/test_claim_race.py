"""A run whose thread was free when the request reserved it but that lost the session to
another process before its turn claimed it gets HTTP 409 `thread_busy`, not a stream.

Two SQLite stores on one file stand for two server processes (their owner locks are
`flock`s, which conflict between open files even within one process). The race is forced,
not timed: when process A's turn goes to claim the session, process B takes it first."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import (
    asgi_client,
    post,
    run_input,
    thread_idle,
    types,
    user,
)

pytestmark = pytest.mark.anyio


class LosesTheRace:
    """Process A's store: the first time A claims the session, B takes it just before."""

    def __init__(self, inner: SqliteStore, other: SqliteStore, stack: contextlib.AsyncExitStack):
        self._inner = inner
        self._other = other
        self._stack = stack
        self.raced = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        if self.raced == 0:
            self.raced += 1
            await self._stack.enter_async_context(self._other.claim(session_id))
        async with self._inner.claim(session_id):
            yield


async def test_the_loser_of_a_claim_race_gets_a_409(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    mine, theirs = SqliteStore(db), SqliteStore(db)
    async with contextlib.AsyncExitStack() as held:
        store = LosesTheRace(mine, theirs, held)
        agent = make_agent(scripted({"text": "hello"}, loop=True), store=store)  # type: ignore[arg-type]
        app = create_app(LocalPort(agent))
        async with asgi_client(app) as client:
            response, wire = await post(client, run_input("t1", "r1", [user("u1", "hi")]))
            assert store.raced == 1
            assert response.status_code == 409, wire
            error = response.json()["error"]
            assert error["code"] == "thread_busy" and "in process" in error["message"]
            assert thread_idle(app, "t1")

            await held.aclose()  # B's turn ends: the same message now runs
            response, wire = await post(client, run_input("t1", "r2", [user("u1", "hi")]))
            assert response.status_code == 200
            assert types(wire)[0] == "RUN_STARTED" and types(wire)[-1] == "RUN_FINISHED"
    with anyio.fail_after(5):
        logged = await theirs.read("t1")
    said = [e for e in logged if isinstance(e, ev.UserMessage)]
    assert [e.message_id for e in said] == ["u1"]  # recorded once, by the run that ran
    await mine.aclose()
    await theirs.aclose()
