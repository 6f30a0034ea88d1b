"""Several `serve` processes on one store, as a user deploys them: two servers on different
ports (standing in for two machines) sharing a SQLite file or a real PostgreSQL, and one
server with `--workers 2`. A thread's run may land on either; a second run is refused with
409 naming the owner, a steer or a stop sent to the other server reaches the run, and
`sessions list` / `sessions check` see every session, clean."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from .serve_child import frames, run_cli, started

SLOW_TEXT = "working on it, one slow character at a time, until stopped ......"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def script(tmp_path: Path) -> str:
    """A model that streams one character every 100 ms (about 7 s a run unless stopped)."""
    path = tmp_path / "slow.json"
    rounds = [{"text": SLOW_TEXT, "chunk_size": 1, "delay_ms": 100}]
    path.write_text(json.dumps({"rounds": rounds, "loop": True}))
    return str(path)


@contextmanager
def serving(storage: str, script: str, *extra: str) -> Iterator[str]:
    """A `serve` child process on a free port; yields its base URL."""
    with started(["--model", f"scripted:{script}", *extra], storage=storage) as (base, _):
        yield base


def body(thread: str, run: str, text: str, **steerable: bool) -> dict[str, object]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"{run}-u", "role": "user", "content": text}],
        "forwardedProps": {"steerable": steerable} if steerable else {},
    }


def run_elsewhere_then_steer_and_stop(runner: str, other: str, thread: str, run: str) -> None:
    """Start a run on `runner`; refuse, steer and stop it through `other`."""
    with (
        httpx.Client(base_url=runner, timeout=30) as first,
        httpx.Client(base_url=other, timeout=30) as second,
        first.stream("POST", "/agent", json=body(thread, run, "start")) as stream,
    ):
        seen = ""
        lines = stream.iter_lines()
        for line in lines:  # wait until the model is streaming
            seen += line + "\n"
            if "TEXT_MESSAGE_CONTENT" in line:
                break
        busy = second.post("/agent", json=body(thread, f"{run}-again", "me too"))
        assert busy.status_code == 409
        assert busy.json()["error"]["code"] == "thread_busy"
        if runner != other:  # the refusal names the process that runs it
            assert "is already running in " in busy.json()["error"]["message"]
        steer = second.post("/agent", json=body(thread, f"{run}-steer", "also", steer=True))
        assert steer.status_code == 200
        assert any(f.get("name") == "steerable.steer_absorbed" for f in frames(steer.text))
        stop = second.post("/agent", json=body(thread, f"{run}-stop", "stop", stop=True))
        assert stop.status_code == 200, stop.text
        assert any(f.get("name") == "steerable.stop_requested" for f in frames(stop.text))
        for line in lines:  # the stopped run ends
            seen += line + "\n"
    kinds = [f["type"] for f in frames(seen.replace("\n", "\n\n"))]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert SLOW_TEXT not in seen.replace('"delta":"', "")  # stopped before the end
    with httpx.Client(base_url=other, timeout=30) as second:
        idle = second.post("/agent", json=body(thread, f"{run}-late", "stop", stop=True))
    assert idle.status_code == 409 and idle.json()["error"]["code"] == "thread_idle"


def check_store(storage: str, threads: list[str]) -> None:
    listed = run_cli(
        "sessions", "list", "--json", "--storage", storage, "--limit", "100", check=True
    )
    ids = {r["session_id"] for r in json.loads(listed.stdout)["sessions"]}
    assert set(threads) <= ids
    checked = run_cli("sessions", "check", "--json", "--storage", storage)
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["ok"], report["problems"]


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return str(request.getfixturevalue("pg_url"))


def test_two_servers_share_a_store_and_reach_each_others_runs(storage: str, script: str) -> None:
    with serving(storage, script) as one, serving(storage, script) as two:
        run_elsewhere_then_steer_and_stop(one, two, "shared-thread", "r1")
        run_elsewhere_then_steer_and_stop(two, one, "shared-thread", "r2")  # next run: other
    check_store(storage, ["shared-thread"])


def test_workers_share_the_port_and_the_store(tmp_path: Path, script: str) -> None:
    storage = str(tmp_path / "workers.db")
    with serving(storage, script, "--workers", "2") as base:
        run_elsewhere_then_steer_and_stop(base, base, "worker-thread", "r1")
        with httpx.Client(base_url=base, timeout=30) as client:
            for n in range(4):
                done = client.post("/agent", json=body(f"t{n}", "r", "go"), timeout=30)
                assert frames(done.text)[-1]["type"] == "RUN_FINISHED"
    check_store(storage, ["worker-thread", "t0", "t1", "t2", "t3"])


def test_workers_refuse_a_store_they_cannot_share(script: str) -> None:
    done = run_cli("serve", "--workers", "2", "--storage", "memory")
    assert done.returncode == 2 and "--workers" in done.stderr and "memory" in done.stderr
