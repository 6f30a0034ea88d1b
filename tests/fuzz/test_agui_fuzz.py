"""Hostile `POST /agent` requests against the real `steerable-bridge serve`: never a 5xx or
a reset, every error in the JSON error shape, every stream strict JSON ending in
RUN_FINISHED / RUN_ERROR.

The corpus (corpus/agui_bodies.json) holds the exact bodies that used to 500, be silently
changed, or run the agent from another web page; the property test draws bodies from
`strategies.bodies` with a fixed seed (bench/fuzz.py runs the long profile).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.strategies import bodies
from tests.fuzz.targets import TRACEBACK, AguiTarget

CORPUS = json.loads((Path(__file__).parent / "corpus" / "agui_bodies.json").read_text())

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def server() -> Iterator[AguiTarget]:
    with AguiTarget() as target:
        yield target
        assert target.process.poll() is None, "the server died"
        stderr = target.stderr()
        assert TRACEBACK not in stderr, stderr[-3000:]


@pytest.mark.parametrize("entry", CORPUS, ids=[e["name"] for e in CORPUS])
def test_each_known_bad_body_gets_its_answer(server: AguiTarget, entry: dict[str, Any]) -> None:
    body = bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode()
    status, problems = server.post(body, entry["headers"])
    assert problems == []
    assert status == entry["expect"]["status"]
    assert server.last_error is not None and server.last_error["code"] == entry["expect"]["code"]


def _raw(server: AguiTarget, request: bytes) -> tuple[int, dict[str, str], bytes]:
    split = urlsplit(server.base)
    with socket.create_connection((split.hostname, split.port), timeout=20) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def test_a_non_numeric_content_length_gets_a_json_400(server: AguiTarget) -> None:
    host = urlsplit(server.base).netloc
    status, headers, body = _raw(
        server,
        f"POST /agent HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        "Content-Length: abc\r\n\r\n{}".encode(),
    )
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "bad_request"


def test_over_limit_uploads_always_get_the_413(server: AguiTarget) -> None:
    """The server's limit is 64 KiB; bodies of 2x to 16x that, declared or chunked."""
    for trial in range(40):
        size = 65536 * (2 + trial % 15)
        body = b'{"threadId":"t","runId":"r","messages":[],"pad":"' + b"x" * size + b'"}'
        if trial % 2:
            status, problems = server.post(body, {"content-type": "application/json"})
        else:
            status, problems = server.post(
                iter([body[i : i + 8192] for i in range(0, len(body), 8192)]),
                {"content-type": "application/json"},
            )
        assert problems == [] and status == 413, (trial, problems)
        assert server.last_error is not None and server.last_error["code"] == "body_too_large"


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(request=bodies())
def test_fuzzed_bodies_never_500_or_break_json(
    server: AguiTarget, request: tuple[bytes, dict[str, str]]
) -> None:
    _status, problems = server.post(*request)
    assert problems == []
