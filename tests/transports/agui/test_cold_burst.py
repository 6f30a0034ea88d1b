"""A burst after a restart: a run of a thread not read yet, arriving while another thread's
history is being read, gets its RUN_STARTED (and its whole run) without waiting for that
load; its stream still carries every LoopEvent of the run (its `run_started` as CUSTOM
after a derived RUN_STARTED) and the snapshot of the whole thread the client lacks. A run
arriving alone keeps reading its thread before it answers (so 409 / 503 stay possible)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.decoding import decode, frames
from tests.transports.agui.harness import (
    asgi_client,
    live_server,
    post,
    run_input,
    types,
    until,
    user,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class SlowToRead(MemoryStore):
    """A store whose reads of a thread in `held` wait until its event is set."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, anyio.Event] = {}
        self.waiting: set[str] = set()

    async def _wait(self, session_id: str) -> None:
        released = self.held.get(session_id)
        if released is not None:
            self.waiting.add(session_id)
            with anyio.fail_after(20):
                await released.wait()
            self.waiting.discard(session_id)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        await self._wait(session_id)
        return await super().read(session_id, after_seq=after_seq)

    async def read_tail(self, session_id: str) -> list[LoopEvent]:
        await self._wait(session_id)
        return await super().read_tail(session_id)


async def test_a_cold_thread_in_a_burst_starts_before_its_history_is_read() -> None:
    store = SlowToRead()
    first = make_agent(scripted({"text": "one"}, {"text": "two"}), store=store)
    async with asgi_client(create_app(LocalPort(first))) as client:
        for thread in ("slow", "cold"):
            _, wire = await post(client, run_input(thread, "r1", [user(f"{thread}-u1", "hi")]))
            assert types(wire)[-1] == "RUN_FINISHED"
    await first.aclose()
    before = wire  # the cold thread's first run, as its client holds it

    store.held = {"slow": anyio.Event(), "cold": anyio.Event()}
    restarted = make_agent(scripted({"text": "three"}, {"text": "four"}), store=store)
    app = create_app(LocalPort(restarted))
    slow: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    async with (
        live_server(app) as base,
        httpx.AsyncClient(base_url=base, timeout=20) as client,
        anyio.create_task_group() as tg,
    ):

        async def slow_run() -> None:
            body = run_input("slow", "r2", [user("slow-u2", "again")])
            _, got = await post(client, body)
            slow.extend(got)

        tg.start_soon(slow_run)
        await until(lambda: "slow" in store.waiting)  # its history is being read
        body = run_input("cold", "r2", [user("cold-u2", "again")])
        with anyio.fail_after(20):
            async with client.stream("POST", "/agent", json=body) as response:
                chunks = response.aiter_bytes()
                head = await anext(chunks)
                assert b'"type":"RUN_STARTED"' in head
                assert "cold" in store.waiting  # out before its history was read
                store.held["cold"].set()
                store.held["slow"].set()
                rest = b"".join([head, *[chunk async for chunk in chunks]])
        wire = frames(rest)

    kinds = types(wire)
    assert kinds[0] == "RUN_STARTED" and wire[0]["metadata"] == {"steerable": {"derived": True}}
    assert kinds[-1] == "RUN_FINISHED" and "RUN_ERROR" not in kinds
    assert next(f["name"] for f in wire if f["type"] == "CUSTOM") == "steerable.run_started"
    logged = await store.read("cold")
    # its request went by reference to the one before the restart (read from the log)
    request = next(f["value"] for f in wire if f.get("name") == "steerable.model_request")
    assert request["request_ref"]["base"] == next(
        f["value"]["seq"] for f in before if f.get("name") == "steerable.model_request"
    )
    decoded = decode([*before, *wire])
    run_id = next(e.run_id for e in decoded[::-1] if isinstance(e, ev.RunStarted))
    assert [e for e in decoded if e.run_id == run_id] == [
        e for e in logged if e.run_id == run_id
    ]  # nothing lost
    snapshot = next(f for f in wire if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
    users = [m["id"] for m in snapshot if m["role"] == "user"]
    assert users == ["cold-u1", "cold-u2"]  # the client lacked the thread: it gets all of it

    assert types(slow)[0] == "RUN_STARTED" and "derived" not in slow[0]["metadata"]["steerable"]
    assert types(slow)[-1] == "RUN_FINISHED"  # alone when it came: read first, as before


async def test_a_deferred_run_still_recognises_the_thread_the_client_sends_back() -> None:
    store = SlowToRead()
    first = make_agent(scripted({"text": "one"}, {"text": "two"}), store=store)
    async with asgi_client(create_app(LocalPort(first))) as client:
        for thread in ("slow", "cold"):
            _, wire = await post(client, run_input(thread, "r1", [user(f"{thread}-u1", "hi")]))
            held = next(f for f in wire if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
    await first.aclose()

    store.held = {"slow": anyio.Event()}
    restarted = make_agent(scripted({"text": "three"}, {"text": "four"}), store=store)
    app = create_app(LocalPort(restarted))
    async with asgi_client(app) as client, anyio.create_task_group() as tg:
        tg.start_soon(post, client, run_input("slow", "r2", [user("slow-u2", "again")]))
        await until(lambda: "slow" in store.waiting)
        body = run_input("cold", "r2", [*held, user("cold-u2", "again")])
        _, wire = await post(client, body)
        store.held["slow"].set()
    kinds = types(wire)
    assert wire[0]["metadata"] == {"steerable": {"derived": True}}  # it was deferred
    assert kinds[-1] == "RUN_FINISHED" and "MESSAGES_SNAPSHOT" not in kinds  # it has them all
    said = [e.message_id for e in await store.read("cold") if isinstance(e, ev.UserMessage)]
    assert said == ["cold-u1", "cold-u2"]  # what it sent back was known, not logged again
