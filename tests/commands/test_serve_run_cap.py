"""How many runs one `serve` streams, and what happens to a run whose client goes away, on a
real server: beyond `--max-runs` a new run gets 503 with `Retry-After` and a coded JSON
error; a client that disconnects mid-stream has its run cancelled (the log says so) and its
thread takes the next run; a bad `--max-runs` exits 2 naming the remedy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

COMMAND = [sys.executable, "-m", "steerable_bridge.cli"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}


@contextmanager
def serving(tmp_path: Path, *extra: str) -> Iterator[tuple[str, str]]:
    """`serve` on a model that streams a little and then waits until cancelled."""
    script = tmp_path / "hang.json"
    rounds = [{"text": "thinking about it", "chunk_size": 4, "hang": True}]
    script.write_text(json.dumps({"rounds": rounds, "loop": True}))
    storage = str(tmp_path / "sessions.db")
    options = ["--port", "0", "--storage", storage, "--model", f"scripted:{script}", *extra]
    process = subprocess.Popen(
        [*COMMAND, "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        text=True,
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().split()[-1].removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=5) as client:
            for _ in range(400):  # bound before the line is printed; serving a moment later
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        yield base, storage
    finally:
        process.terminate()
        process.wait(timeout=30)


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
    exported = subprocess.run(
        [*COMMAND, "sessions", "export", "a", "--storage", storage],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=True,
    )
    finished = [
        event
        for event in map(json.loads, exported.stdout.splitlines())
        if event.get("kind") == "run_finished"
    ]
    assert [event["stop_reason"] for event in finished] == ["cancelled", "cancelled"]


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_max_runs_exits_2_naming_the_remedy(value: str) -> None:
    done = subprocess.run(
        [*COMMAND, "serve", "--max-runs", value, "--storage", "memory", "--port", "0"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--max-runs" in done.stderr and "whole number" in done.stderr
    assert done.stdout == ""
