"""The AG-UI app on a real uvicorn (127.0.0.1, port 0): streaming as it happens, keep-alive
comments, and a client that disconnects cancelling its turn within a second."""

from __future__ import annotations

import contextlib
import logging
import time

import anyio
import httpx
import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui import threads as threads_module
from steerable_bridge.transports.agui.app import create_app
from tests.lanes import examples
from tests.runtime.harness import scripted
from tests.transports.agui.decoding import frames
from tests.transports.agui.harness import (
    SLOW,
    agent_for,
    live_server,
    run_input,
    session_of,
    thread_idle,
    until,
    user,
)

pytestmark = pytest.mark.anyio


async def test_events_arrive_while_the_turn_runs_with_keepalive_comments() -> None:
    slow = scripted({"text": "abcdefghij", "chunk_size": 1, "delay_ms": 40})
    app = create_app(LocalPort(agent_for(slow)), keepalive_s=0.02)  # sent in the 40 ms pauses
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        started = time.monotonic()
        first_at = None
        body = b""
        async with client.stream(
            "POST", "/agent", json=run_input("t1", "r1", [user("u", "go")])
        ) as response:
            async for chunk in response.aiter_bytes():
                if first_at is None and b"TEXT_MESSAGE_CONTENT" in chunk:
                    first_at = time.monotonic() - started
                body += chunk
        total = time.monotonic() - started
    assert first_at is not None and first_at < total - 0.2  # streamed, not buffered
    assert b": keep-alive\n\n" in body
    wire = frames(body)
    assert wire[-1]["type"] == "RUN_FINISHED"


async def test_disconnect_cancels_the_turn_within_a_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="steerable_bridge.agui")
    hangs = scripted({"text": "working", "tool_calls": [{"id": "c1", "name": "slow"}]})
    app = create_app(LocalPort(agent_for(hangs, tools=[SLOW])))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream(
            "POST", "/agent", json=run_input("t1", "r1", [user("u", "go")])
        ) as response:
            async for line in response.aiter_lines():
                if "steerable.tool_started" in line:
                    break
        left = time.monotonic()
        session = session_of(app, "t1")
        await until(lambda: not session.running, 1.0)
        elapsed = time.monotonic() - left
        await until(lambda: thread_idle(app, "t1"), 1.0)
    assert elapsed < 1.0
    log = list(session.log.view())
    finished = [e for e in log if isinstance(e, ev.RunFinished)]
    assert [f.stop_reason for f in finished] == ["cancelled"]
    results = [e for e in log if isinstance(e, ev.ToolFinished)]
    assert [(r.call_id, r.status) for r in results] == [("c1", "cancelled")]
    assert isinstance(log[-1], ev.RunFinished)
    assert "client disconnected; cancelling the turn" in caplog.text
    assert "ended cancelled" in caplog.text


async def test_a_thread_whose_client_left_is_forgotten_and_reloads_whole() -> None:
    """Nobody watches a run whose client left: once it ended, the server holds neither its
    thread nor its session (memory back), and the next run reloads both from the store,
    so the conversation is whole."""
    hangs = scripted(
        {"text": "working", "tool_calls": [{"id": "c1", "name": "slow"}]}, {"text": "back"}
    )
    agent = agent_for(hangs, tools=[SLOW])
    app = create_app(LocalPort(agent))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream(
            "POST", "/agent", json=run_input("t1", "r1", [user("u1", "first")])
        ) as response:
            async for line in response.aiter_lines():
                if "steerable.tool_started" in line:
                    break
        await until(lambda: len(app.state.threads) == 0 and agent.sessions_in_memory == 0)
        again = await client.post(
            "/agent", json=run_input("t1", "r2", [user("u1", "first"), user("u2", "again")])
        )
    wire = frames(again.content)
    assert wire[-1]["type"] == "RUN_FINISHED"
    snapshot = [f for f in wire if f["type"] == "MESSAGES_SNAPSHOT"][-1]
    said = [m.get("content") for m in snapshot["messages"] if m["role"] == "user"]
    assert said == ["first", "again"]  # u1 known from the store, not sent twice


async def test_a_thread_whose_client_left_takes_the_next_request_at_once() -> None:
    """Disconnect mid-turn, then POST again on the same thread straight away, 50 times (the
    fast lane's share of them, tests/lanes.py): each new run is taken (waiting, bounded, for
    the cancellation to settle), never a 409."""
    trials = examples(50)
    hangs = scripted({"text": "working", "tool_calls": [{"id": "c1", "name": "slow"}]}, loop=True)
    app = create_app(LocalPort(agent_for(hangs, tools=[SLOW])))
    statuses = []
    known: list[dict[str, str]] = []
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        for trial in range(trials):
            known.append(user(f"u{trial}", "go"))
            async with client.stream(
                "POST", "/agent", json=run_input("t1", f"r{trial}", known)
            ) as response:
                statuses.append(response.status_code)
                if response.status_code != 200:
                    break
                async for line in response.aiter_lines():
                    if "steerable.tool_started" in line:
                        break
        session = session_of(app, "t1")
        await until(lambda: not session.running, 2.0)
    assert statuses == [200] * trials
    finished = [e for e in session.log.view() if isinstance(e, ev.RunFinished)]
    assert [f.stop_reason for f in finished] == ["cancelled"] * trials


async def test_a_stale_release_never_frees_the_next_run() -> None:
    threads = create_app(LocalPort(agent_for())).state.threads
    first = await threads.claim("t1")
    assert first is not None
    thread, old = first
    old.release()  # the disconnected run lets go early
    second = await threads.claim("t1")
    assert second is not None
    assert second[0] is thread and second[1] is not old
    old.release()  # the old stream closes later: ignored
    assert await threads.claim("t1") is None


async def test_a_request_read_before_the_old_clients_disconnect_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that aborts a run and posts at once: the new request can reach the server
    before the old connection's end does. It waits for that disconnect (bounded by
    `DISCONNECT_GRACE_S`, widened here so the order is forced, not timed) and is taken."""
    monkeypatch.setattr(threads_module, "DISCONNECT_GRACE_S", 30.0)
    hangs = scripted(
        {"text": "working", "tool_calls": [{"id": "c1", "name": "slow"}]}, {"text": "back"}
    )
    app = create_app(LocalPort(agent_for(hangs, tools=[SLOW])))
    first = [user("u1", "go")]
    results: dict[str, httpx.Response] = {}
    async with (
        live_server(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        httpx.AsyncClient(base_url=url, timeout=10) as other,
        contextlib.AsyncExitStack() as stack,
    ):
        response = await stack.enter_async_context(
            client.stream("POST", "/agent", json=run_input("t1", "r1", first))
        )
        lines = response.aiter_lines()  # held: a generator dropped would end the stream
        async for line in lines:
            if "steerable.tool_started" in line:
                break

        async def second() -> None:
            body = run_input("t1", "r2", [*first, user("u2", "again")])
            results["second"] = await other.post("/agent", json=body)

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            thread = app.state.threads.get("t1")
            await until(lambda: thread.left is not None)  # it waits for a disconnect
            await response.aclose()  # now the first client leaves
    assert results["second"].status_code == 200
    assert frames(results["second"].content)[-1]["type"] == "RUN_FINISHED"
