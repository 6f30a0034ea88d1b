"""`steerable-bridge serve` as a user runs it: a child process on port 0 that prints its URLs,
answers /health (with a `Date` header, which its own tick makes) and the chat page, and
streams a run; bad options exit 2 with the remedy."""

from __future__ import annotations

import json
import random
from email.utils import formatdate, parsedate_to_datetime

import httpx
import pytest

from steerable_bridge.commands.serve import http_date

from .serve_child import run_cli, started


@pytest.mark.timeout(60)
def test_serve_prints_its_url_and_streams_a_run() -> None:
    with started([]) as (base, _):  # the first line printed names the endpoint
        assert base.startswith("http://127.0.0.1:")
        assert base.rsplit(":", 1)[1] != "0"
        with httpx.Client(base_url=base, timeout=10) as client:
            health = client.get("/health")
            assert health.json()["status"] == "ok"
            assert parsedate_to_datetime(health.headers["date"]).tzinfo is not None  # our tick's
            assert "<textarea" in client.get("/").text
            body = {
                "threadId": "cli-thread",
                "runId": "r1",
                "messages": [{"id": "u1", "role": "user", "content": "use a tool"}],
            }
            reply = client.post("/agent", json=body)
        frames = [
            json.loads(b.partition("data: ")[2])
            for b in reply.text.split("\n\n")
            if b.startswith(("data: ", "id: "))
        ]
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert "TOOL_CALL_RESULT" in kinds


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--max-body", "0"], "--max-body"), (["--port", "70000"], "--port")],
)
def test_bad_options_exit_2_naming_the_option(args: list[str], message: str) -> None:
    done = run_cli("serve", *args, "--storage", "memory")
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(host: str) -> None:
    done = run_cli("serve", "--host", host, "--port", "0", "--storage", "memory")  # no token
    assert done.returncode == 2
    assert "--token" in done.stderr and "--insecure-no-token" in done.stderr
    assert done.stdout == ""  # never bound, never printed a URL


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_health_names_nothing_without_the_configured_token() -> None:
    with started(["--token", "s3cret"]) as (base, _):
        with httpx.Client(base_url=base, timeout=10) as client:
            anonymous = client.get("/health")
            detailed = client.get("/health", headers={"Authorization": "Bearer s3cret"})
        assert anonymous.status_code == 200 and anonymous.text == "ok"
        assert detailed.json()["model"] and "tools" in detailed.json()


def test_the_date_header_is_written_as_email_utils_writes_it() -> None:
    rng = random.Random(7)
    for now in [0.0, 951782400.5, *(rng.uniform(0, 4e9) for _ in range(200))]:
        assert http_date(now).decode() == formatdate(now, usegmt=True)
