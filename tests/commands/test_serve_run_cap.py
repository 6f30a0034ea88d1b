"""How many runs one `serve` streams, and what happens to a run whose client goes away, on a
real server: beyond `--max-runs` a new run gets 503 with `Retry-After` and a coded JSON
error; a client that disconnects mid-stream has its run cancelled (the log says so) and its
thread takes the next run; a bad `--max-runs` exits 2 naming the remedy."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from .serve_child import run_cli, started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@contextmanager
def serving(tmp_path: Path, *extra: str) -> Iterator[tuple[str, str]]:
    """`serve` on a model that streams a little and then waits until cancelled."""
    script = tmp_path / "hang.json"
    rounds = [{"text": "thinking about it", "chunk_size": 4, "hang": True}]
    script.write_text(json.dumps({"rounds": rounds, "loop": True}))
    storage = str(tmp_path / "sessions.db")
    with started(["--model", f"scripted:{script}", *extra], storage=storage) as (base, _):
        yield base, storage


def body(thread: str, run: str) -> dict[str, object]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"{run}-u", "role": "user", "content": "go"}],
    }


@contextmanager
def streaming(client: httpx.Client, thread: str, run: str) -> Iterator[httpx.Response]:
    """A run whose stream has begun (its first text arrived); closed on leaving."""
    with client.stream("POST", "/agent", json=body(thread, run)) as reply:
        assert reply.status_code == 200
        lines = reply.iter_lines()  # held: a dropped iterator closes the response
        for line in lines:
            if '"TEXT_MESSAGE_CONTENT"' in line:
                break
        yield reply
        lines.close()


def open_streams(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("steerable_sse_clients "):
            return float(line.split()[-1])
    raise AssertionError("the open-streams gauge is missing")


def wait_for_streams(client: httpx.Client, count: int) -> None:
    """Until the server reports `count` open streams (bounded: a safety timeout only)."""
    deadline = time.monotonic() + 20
    while open_streams(client) != count:
        assert time.monotonic() < deadline, f"the server still has {open_streams(client)} open"
        time.sleep(0.05)


def test_runs_beyond_the_cap_get_503_and_a_gone_client_frees_its_slot(tmp_path: Path) -> None:
    with (
        serving(tmp_path, "--max-runs", "2") as (base, storage),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        with streaming(client, "a", "a1"), streaming(client, "b", "b1"):
            refused = client.post("/agent", json=body("c", "c1"))
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert error["code"] == "too_many_runs" and "--max-runs" in error["message"]
            assert client.get("/health").status_code == 200  # the cap is on runs only
        # Both clients left mid-stream: their runs are cancelled and their slots freed.
        wait_for_streams(client, 0)
        with streaming(client, "a", "a2"), streaming(client, "c", "c2"):
            assert open_streams(client) == 2  # the thread took a new run, the slot a third
    exported = run_cli("sessions", "export", "a", "--storage", storage, check=True)
    finished = [
        event
        for event in map(json.loads, exported.stdout.splitlines())
        if event.get("kind") == "run_finished"
    ]
    assert [event["stop_reason"] for event in finished] == ["cancelled", "cancelled"]


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_max_runs_exits_2_naming_the_remedy(value: str) -> None:
    done = run_cli("serve", "--max-runs", value, "--storage", "memory", "--port", "0")
    assert done.returncode == 2 and "--max-runs" in done.stderr and "whole number" in done.stderr
    assert done.stdout == ""
