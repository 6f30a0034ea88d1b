"""The dead man's switch: a command's group dies when the agent's end of the watch closes,
and a gated command never runs if the agent dies before arming it.

The agent's death is what closes the pipe in real life (tests/transports/acp/test_kill9.py
kills a real agent); here the test closes the pipe itself, which is what the kernel does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools.deathwatch import GATE_EXIT, arm, gated
from tests.adapters.tools.conftest import live_group_members

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def _gone(pgid: int) -> None:
    with anyio.fail_after(10):
        while live_group_members(pgid):  # noqa: ASYNC110 - the kernel's state is the event
            await anyio.sleep(0.01)


async def test_the_group_is_killed_when_the_watch_pipe_closes(tmp_path: Path) -> None:
    process = await anyio.open_process(
        gated(["/bin/sh", "-c", "sleep 30 & sleep 30 & echo up; wait"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    watch = await arm(process)
    assert process.stdout is not None
    with anyio.fail_after(10):
        assert await process.stdout.receive() == b"up\n"
    assert len(live_group_members(process.pid)) == 3
    assert watch.process is not None and watch.process.stdin is not None
    await watch.process.stdin.aclose()  # what the kernel does when the agent dies
    await _gone(process.pid)
    with anyio.fail_after(10):
        assert await process.wait() == -9
    await watch.release()
    await process.aclose()


async def test_release_stops_the_watch_without_touching_the_group(tmp_path: Path) -> None:
    process = await anyio.open_process(
        gated(["sleep", "30"]), stdin=subprocess.PIPE, start_new_session=True
    )
    watch = await arm(process)
    await watch.release()
    assert live_group_members(process.pid) == [process.pid]
    process.kill()
    with anyio.fail_after(10):
        await process.wait()


async def test_a_gate_never_opened_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    process = await anyio.open_process(
        gated(["/bin/sh", "-c", f"touch {marker}"]), stdin=subprocess.PIPE
    )
    assert process.stdin is not None
    await process.stdin.aclose()  # the agent died before arming
    with anyio.fail_after(10):
        assert await process.wait() == GATE_EXIT
    assert not marker.exists()


def test_a_missing_program_fails_like_a_direct_spawn() -> None:
    with pytest.raises(FileNotFoundError):
        gated(["/nonexistent/program"])
    with pytest.raises(FileNotFoundError):
        gated(["no-such-program-here"], {"PATH": "/usr/bin:/bin"})
