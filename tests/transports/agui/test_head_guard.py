"""The head guard in front of both of uvicorn's HTTP parsers (httptools and h11), in-process
on 127.0.0.1, port 0, plus the connection budget `serve` derives from the fd limit."""

from __future__ import annotations

import json
import resource
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from steerable_bridge.transports.agui import http_errors
from steerable_bridge.transports.agui.head_guard import (
    ConnectionBudget,
    ConnectionLimits,
    connection_budget,
    guarded,
)
from tests.prompt_server import PromptServer

pytestmark = pytest.mark.timeout(60)

LIMITS = ConnectionLimits(max_head_bytes=4096, head_timeout_s=0.5, body_timeout_s=0.5)
IMPATIENT = ConnectionLimits(max_head_bytes=4096, head_timeout_s=0.1, body_timeout_s=0.1)
"""For the tests that wait for a timeout to pass: it comes sooner (the others keep `LIMITS`,
so a loaded machine has time to send a whole request)."""


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"size": len(await request.body())})


APP = Starlette(routes=[Route("/echo", echo, methods=["GET", "POST"])])


def protocols() -> list[Any]:
    found = [pytest.param(http_errors._h11(), id="h11")]
    try:
        import httptools  # noqa: F401
    except ImportError:
        return found
    return [*found, pytest.param(http_errors._json_error_protocol(), id="httptools")]


@contextmanager
def running(protocol: Any, limits: ConnectionLimits = LIMITS) -> Iterator[tuple[str, int]]:
    """A uvicorn server in a thread with `protocol` behind the guard; yields its address."""
    budget = ConnectionBudget(max_connections=4, backlog=16, fd_limit=1024)
    config = uvicorn.Config(
        APP,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        http=guarded(protocol, limits, budget),
        h11_max_incomplete_event_size=limits.max_head_bytes,
    )
    server = PromptServer(config)
    thread = server.start_in_thread()
    try:
        yield server.servers[0].sockets[0].getsockname()[:2]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(params=protocols())
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with running(request.param) as where:
        yield where


@pytest.fixture(params=protocols())
def impatient_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with running(request.param, IMPATIENT) as where:
        yield where


def exchange(where: tuple[str, int], *parts: bytes) -> tuple[int, dict[str, Any]]:
    """Send `parts`, read until the server closes: (status, JSON body)."""
    with socket.create_connection(where, timeout=10) as sock:
        try:
            for part in parts:
                sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            if b"connection: close" not in data.lower() and data.endswith(b"}"):
                break  # a kept-alive answer: done once its JSON body is in
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_small_request_is_served(server: tuple[str, int]) -> None:
    status, body = exchange(
        server, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
    )
    assert (status, body) == (200, {"size": 3})


def test_an_endless_header_gets_431(server: tuple[str, int]) -> None:
    status, body = exchange(server, b"GET /echo HTTP/1.1\r\nHost: x\r\nX: ", *[b"a" * 1024] * 64)
    assert status == 431 and body["error"]["code"] == "head_too_large"


def test_a_complete_head_past_the_limit_gets_431(server: tuple[str, int]) -> None:
    status, _ = exchange(
        server, b"GET /echo HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 5000 + b"\r\n\r\n"
    )
    assert status == 431


def test_a_slow_head_gets_408(impatient_server: tuple[str, int]) -> None:
    status, body = exchange(impatient_server, b"GET /echo HTTP/1.1\r\n")
    assert status == 408 and "head" in body["error"]["message"]


def test_a_missing_body_gets_408(impatient_server: tuple[str, int]) -> None:
    status, body = exchange(
        impatient_server, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\na"
    )
    assert status == 408 and "body" in body["error"]["message"]


def test_past_the_cap_the_oldest_idle_connection_is_shed(server: tuple[str, int]) -> None:
    idle = [socket.create_connection(server, timeout=10) for _ in range(4)]
    try:
        for sock in idle:  # one request each, answered: taken in, oldest first, then idle
            sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while not reply.endswith(b"}"):  # the whole answer, so what follows is new
                chunk = sock.recv(65536)
                assert chunk, "the server closed a connection it should keep alive"
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200")
        status, _ = exchange(server, b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200
        first = idle[0].recv(65536)
        assert b" 408 " in first and b"connection limit" in first
    finally:
        for sock in idle:
            sock.close()


def test_the_budget_leaves_room_for_the_accept_burst_and_the_process() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = connection_budget(ConnectionLimits())
    assert budget.fd_limit == soft or soft == resource.RLIM_INFINITY
    assert budget.max_connections + budget.backlog < budget.fd_limit
    assert 16 <= budget.backlog <= 2048


def test_an_explicit_cap_that_does_not_fit_is_lowered() -> None:
    fits = connection_budget(ConnectionLimits())
    asked = connection_budget(ConnectionLimits(max_connections=fits.max_connections + 10**6))
    assert asked.max_connections < fits.max_connections + 10**6
    assert connection_budget(ConnectionLimits(max_connections=3)).max_connections == 3


def test_a_body_larger_than_the_head_limit_is_not_counted_as_head(server: tuple[str, int]) -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n"
    status, body = exchange(server, head + b"a" * 20000)
    assert (status, body) == (200, {"size": 20000})


def test_a_bare_lf_head_is_served_by_h11_with_its_body() -> None:
    """h11 takes bare-LF lines: the guard must see that head end too (else its body would
    be counted as head)."""
    head = b"POST /echo HTTP/1.1\nHost: x\nContent-Length: 9000\nConnection: close\n\n"
    with running(http_errors._h11()) as where:
        status, body = exchange(where, head + b"a" * 9000)
    assert (status, body) == (200, {"size": 9000})
