"""What a connection may cost the real `serve` before any auth: oversized heads get 431, slow
heads and bodies 408, idle connections are shed so new ones (and `/health`) get in, even
with 300 idle connections under a 256 file-descriptor limit."""

from __future__ import annotations

import json
import resource
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from urllib.parse import urlsplit

import httpx
import pytest

from .serve_child import started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def connect(base: str) -> socket.socket:
    sock = socket.create_connection(address(base), timeout=20)
    return sock


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Everything the server sends until it closes: (status, headers, body)."""
    data = b""
    while True:
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            break
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    return status, headers, body


def host(base: str) -> bytes:
    return urlsplit(base).netloc.encode()


@pytest.fixture(scope="module")
def serve() -> Iterator[str]:
    args = ["--max-head", "8192", "--head-timeout", "1", "--body-timeout", "1"]
    with started(args) as (base, _):
        yield base


def test_an_oversized_head_gets_431_and_is_not_buffered(serve: str) -> None:
    with connect(serve) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: " + host(serve) + b"\r\nX-Big: ")
        try:
            for _ in range(64):  # 4 MiB of one header value, sent until the server answers
                sock.sendall(b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, headers, body = answer(sock)
    assert status == 431
    assert json.loads(body)["error"]["code"] == "head_too_large"
    assert headers["connection"] == "close"


def test_many_small_headers_past_the_limit_get_431(serve: str) -> None:
    headers = b"".join(b"X-H%d: %s\r\n" % (n, b"v" * 100) for n in range(100))
    with connect(serve) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: " + host(serve) + b"\r\n" + headers + b"\r\n")
        status, _, _ = answer(sock)
    assert status == 431


def test_a_head_that_never_completes_gets_408_and_the_connection_closes(serve: str) -> None:
    with connect(serve) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: " + host(serve) + b"\r\n")
        status, _, body = answer(sock)  # returns once the server closed the connection
    assert status == 408
    assert json.loads(body)["error"]["code"] == "request_timeout"


def test_a_body_promised_and_never_sent_gets_408(serve: str) -> None:
    with connect(serve) as sock:
        sock.sendall(
            b"POST /agent HTTP/1.1\r\nHost: " + host(serve) + b"\r\ncontent-type:"
            b' application/json\r\ncontent-length: 500\r\n\r\n{"threadId"'
        )
        status, _, body = answer(sock)
    assert status == 408
    assert "body" in json.loads(body)["error"]["message"]


def test_a_normal_request_still_works_and_keeps_alive(serve: str) -> None:
    with httpx.Client(base_url=serve, timeout=10) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/health").status_code == 200


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_health_answers_with_300_idle_connections_under_a_256_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1024), hard))
    args = ["--head-timeout", "60"]  # only shedding can close an idle one within the test
    with started(args, preexec_fn=_limit_fds) as (base, _), ExitStack() as stack:
        idle = []
        for _ in range(300):
            sock = stack.enter_context(socket.create_connection(address(base), timeout=10))
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: ")  # a head that is never finished
            idle.append(sock)
        with httpx.Client(base_url=base, timeout=10) as client:
            answers = [client.get("/health").status_code for _ in range(5)]
        assert answers == [200] * 5
        shed = 0
        for sock in idle[:20]:  # the oldest idle connections were the ones dropped
            status, _, body = answer(sock)
            shed += status == 408 and "connection limit" in json.loads(body)["error"]["message"]
        assert shed == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-head", "10"], "--max-head"),
        (["--head-timeout", "0"], "--head-timeout"),
        (["--body-timeout", "soon"], "--body-timeout"),
        (["--max-connections", "-1"], "--max-connections"),
    ],
)
def test_bad_limits_exit_2_naming_the_option(args: list[str], message: str) -> None:
    import subprocess

    from .serve_child import COMMAND, clean_env

    done = subprocess.run(
        [*COMMAND, *args, "--storage", "memory", "--port", "0"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and message in done.stderr
