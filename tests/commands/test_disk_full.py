"""A real full disk under `steerable-bridge acp` and `serve`: the store lives on a small
tmpfs that the test fills with a plain file (needs root to mount; skipped where it cannot;
`tests/transports/agui/test_storage_full.py` fills the disk at the SQLite layer instead and
runs everywhere). The prompt that cannot be stored fails with `storage_full` (the JSON-RPC
error's data, the AG-UI RUN_ERROR code; 507 before a stream), the agent keeps serving, and
once the file is removed the session goes on and loads whole."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from acp import RequestError

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from tests.transports.acp.harness import running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

BIG = "a long paste that the full disk cannot take. " * 20_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted under tmp_path, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
        timeout=10,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False, timeout=10)


def _fill(disk: Path) -> Path:
    """Write a file until the disk has no space left; returns it."""
    filler = disk / "filler"
    block = b"\0" * 65536
    with filler.open("wb") as handle:
        while True:
            try:
                handle.write(block)
                handle.flush()
            except OSError as err:
                assert err.errno == errno.ENOSPC
                break
    return filler


def _stored_code(error: RequestError) -> str:
    data = error.data if isinstance(error.data, dict) else {}
    return str(data.get("code"))


@pytest.mark.anyio
async def test_acp_prompt_on_a_full_disk_is_storage_full_and_the_session_survives(
    tmp_path: Path, small_disk: Path
) -> None:
    db = small_disk / "sessions.db"
    env = {"STEERABLE_STORAGE": str(db)}
    async with running(tmp_path, [{"text": "noted"}], loop=True, env=env) as run:
        await run.init()
        sid = await run.new(tmp_path)
        first = await run.prompt(sid, "hello")
        filler = await anyio.to_thread.run_sync(_fill, small_disk)
        with pytest.raises(RequestError) as full:
            await run.prompt(sid, BIG)
        with pytest.raises(RequestError) as still:
            await run.prompt(sid, "are you there?")
        filler.unlink()
        after = await run.prompt(sid, "space is back")
    assert first.stop_reason == after.stop_reason == "end_turn"
    for refused in (full.value, still.value):
        assert _stored_code(refused) == "storage_full", refused
        assert "free some space" in str(refused)
    assert "Traceback" not in run.stderr()

    store = SqliteStore(db)
    try:
        events = await store.read(sid)
    finally:
        store.close()
    assert [e.seq for e in events] == list(range(len(events)))
    ends = [e for e in events if isinstance(e, ev.RunFinished | ev.RunFailed)]
    assert [type(e).__name__ for e in ends] == ["RunFinished", "RunFailed", "RunFinished"]
    assert isinstance(ends[1], ev.RunFailed) and ends[1].code == "storage_full"
    said = [
        "".join(getattr(p, "text", "") for p in e.content)
        for e in events
        if isinstance(e, ev.UserMessage)
    ]
    # the full disk took nothing of the refused prompts (the error says to send them again)
    assert said == ["hello", "space is back"]


def _frames(text: str) -> list[dict[str, object]]:
    return [
        json.loads(b.partition("data: ")[2])
        for b in text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


def test_serve_run_on_a_full_disk_is_a_storage_full_run_error(
    tmp_path: Path, small_disk: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    env |= {"STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(tmp_path / "state")}
    db = small_disk / "sessions.db"
    command = [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0"]
    with (tmp_path / "serve.log").open("w") as log:
        process = subprocess.Popen(
            [*command, "--storage", str(db)], stdout=subprocess.PIPE, stderr=log, env=env, text=True
        )
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().split()[-1]

        def post(run_id: str, *texts: str) -> httpx.Response:
            messages = [{"id": f"u{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
            body = {"threadId": "t1", "runId": run_id, "messages": messages}
            for _ in range(200):  # listening a moment after the URL is printed
                try:
                    return client.post(endpoint, json=body)
                except httpx.ConnectError:
                    time.sleep(0.05)
            raise AssertionError("serve never answered")

        with httpx.Client(timeout=30) as client:
            first = _frames(post("r1", "hello").text)
            filler = _fill(small_disk)
            full = _frames(post("r2", "hello", "more").text)
            refused = post("r3", "hello", "more", "again")
            filler.unlink()
            after = _frames(post("r4", "hello", "more", "again", "ok?").text)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert first[-1]["type"] == "RUN_FINISHED"
    assert full[-1]["type"] == "RUN_ERROR" and full[-1]["code"] == "storage_full"
    assert [f["type"] for f in full].count("RUN_ERROR") == 1
    assert refused.status_code == 507 and refused.json()["error"]["code"] == "storage_full"
    assert after[-1]["type"] == "RUN_FINISHED"
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
