"""First frames first (`first_frames.py`): a request is counted from its accept (or its
place in the accept queue, or its parsed head on a kept-alive connection) until its
response starts; streaming runs give way while one is, and a count nobody answers expires."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
import uvicorn
from anyio.lowlevel import checkpoint
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from steerable_bridge.transports.agui import http_errors
from steerable_bridge.transports.agui.first_frames import CountingSocket, FirstFrames
from steerable_bridge.transports.agui.head_guard import ConnectionBudget, ConnectionLimits
from tests.prompt_server import PromptServer

pytestmark = pytest.mark.timeout(60)


def test_a_request_is_pending_until_answered() -> None:
    gate = FirstFrames()
    assert not gate.pending()
    gate.arrived()
    gate.arrived()
    assert gate.pending()
    gate.answered()
    assert gate.pending()
    gate.answered()
    assert not gate.pending()
    gate.answered()  # one more (a connection lost after its answer) changes nothing
    assert not gate.pending()


def test_a_count_nobody_answers_expires() -> None:
    gate = FirstFrames(max_age_s=-1.0)  # every count is older than that already
    gate.arrived()
    assert not gate.pending()


@pytest.mark.anyio
async def test_give_way_returns_when_the_last_request_is_answered() -> None:
    gate = FirstFrames()
    gate.arrived()
    returned = anyio.Event()

    waiting = anyio.Event()

    async def streaming_run() -> None:
        waiting.set()
        await gate.give_way(max_s=3600)  # only the answer ends this wait in the test's time
        returned.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(streaming_run)
        await waiting.wait()
        await checkpoint()
        assert not returned.is_set()
        gate.answered()
        await returned.wait()


def test_the_counting_socket_counts_a_queued_connection_then_its_accept() -> None:
    gate = FirstFrames()
    with CountingSocket(socket.AF_INET, socket.SOCK_STREAM, first_frames=gate) as listener:
        assert gate.accepts_counted
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        assert not gate.pending()
        with socket.create_connection(listener.getsockname()[:2]):
            readable, _, _ = select.select([listener], [], [], 10)  # the kernel queued it
            assert readable
            assert gate.pending()  # seen in the accept queue, before any accept
            conn, _ = listener.accept()
            with conn:
                assert gate.pending()  # counted now
                gate.answered()
                assert not gate.pending()


async def probe(request: Request) -> JSONResponse:
    return JSONResponse({"pending": http_errors.FIRST_FRAMES.pending()})


@contextmanager
def serving(gate: FirstFrames) -> Iterator[tuple[str, int]]:
    """A uvicorn server in a thread on a `CountingSocket` (the protocol `serve` uses)."""
    sock = CountingSocket(socket.AF_INET, socket.SOCK_STREAM, first_frames=gate)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    limits = ConnectionLimits(max_head_bytes=4096, head_timeout_s=5, body_timeout_s=5)
    budget = ConnectionBudget(max_connections=4, backlog=16, fd_limit=1024)
    config = uvicorn.Config(
        Starlette(routes=[Route("/probe", probe)]),
        log_level="warning",
        loop="asyncio",  # serve's loop (uvloop accepts without the socket object's accept)
        http=http_errors.json_error_protocol(limits, budget),
    )
    server = PromptServer(config)
    thread = server.start_in_thread([sock])
    try:
        yield sock.getsockname()[:2]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _get(conn: socket.socket) -> bytes:
    conn.sendall(b"GET /probe HTTP/1.1\r\nHost: t\r\n\r\n")
    got = b""
    while not got.endswith(b"}"):
        chunk = conn.recv(4096)
        assert chunk, "the server closed the connection"
        got += chunk
    return got


def test_each_request_is_counted_until_its_response_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = FirstFrames()
    monkeypatch.setattr(http_errors, "FIRST_FRAMES", gate)
    with serving(gate) as address, socket.create_connection(address) as conn:
        assert b'{"pending":true}' in _get(conn)  # the new connection, counted at its accept
        assert b'{"pending":true}' in _get(conn)  # kept alive: counted at its parsed head
        assert not gate.pending()  # both answered when their responses started


def test_a_run_parks_at_most_its_budget_whatever_waits_unanswered() -> None:
    from steerable_bridge.transports.agui.first_frames import (
        BUDGET_S,
        GIVE_WAY_S,
        SHARE,
        GiveWayBudget,
    )

    budget = GiveWayBudget(began=0.0)
    assert budget.allows(0.0)  # its first wait, at once
    budget.spent(BUDGET_S)
    assert not budget.allows(0.0)
    # a count nobody answers (connections that never send a request) has the run park
    # whenever its budget allows, each time a whole GIVE_WAY_S: an event every 10 ms for
    # 100 s of streaming parks it at most SHARE of that, plus one wait
    now, parked = 0.0, BUDGET_S
    while now < 100.0:
        if budget.allows(now):
            budget.spent(GIVE_WAY_S)
            parked += GIVE_WAY_S
            now += GIVE_WAY_S
        now += 0.01
    assert parked <= BUDGET_S + SHARE * now + GIVE_WAY_S
    assert parked >= SHARE * now * 0.9  # and a real burst still gets its share
