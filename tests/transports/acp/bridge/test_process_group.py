"""`process.agent_process`: leaving its block ends every process of the agent's group.

The agent here is a launcher whose child ignores SIGTERM and never reads its stdin (the
worst case: only SIGKILL ends it), and which may itself exit first — the block must still
leave nothing running. Each end is waited for on the process's pidfd, bounded.
"""

from __future__ import annotations

import os
import select
import sys

import anyio
import pytest

from steerable_bridge.transports.acp.bridge.process import agent_process, exited, group_alive

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(60)]

STUBBORN = """\
import signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True);"
    " time.sleep(300)"
)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
child.stdout.readline()  # it ignores SIGTERM from now on
print(child.pid, flush=True)
if sys.argv[1] == "stay":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child.wait()
"""
GONE_WITHIN_S = 20.0


def _still_running(pid: int) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        ready, _, _ = select.select([fd], [], [], GONE_WITHIN_S)
    finally:
        os.close(fd)
    return not ready


@pytest.mark.parametrize("launcher", ["stay", "leave"])
async def test_leaving_the_block_kills_a_child_that_ignores_sigterm(launcher: str) -> None:
    argv = [sys.executable, "-c", STUBBORN, launcher]
    with anyio.fail_after(40):
        async with agent_process(argv, env=dict(os.environ), cwd=None, limit=2**16) as process:
            assert process.stdout is not None
            child = int(await process.stdout.readline())
            leader = process.pid
            if launcher == "leave":
                await exited(process)  # the launcher is gone, its child is not
                assert group_alive(process)
    assert not _still_running(leader)
    assert not _still_running(child), "the launcher's child outlived the block"


HOLDER = """\
import os, sys, anyio
from steerable_bridge.transports.acp.bridge.process import agent_process

async def main() -> None:
    argv = [sys.executable, "-c", sys.argv[1], "stay"]
    async with agent_process(argv, env=dict(os.environ), cwd=None, limit=2**16) as process:
        child = int(await process.stdout.readline())
        print(process.pid, child, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


def test_a_sigkill_of_the_holder_still_ends_the_agents_group() -> None:
    """`serve` killed with SIGKILL never leaves its block: the deathwatch ends the group."""
    import signal
    import subprocess

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, STUBBORN], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        leader, child = (int(pid) for pid in holder.stdout.readline().split())
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=GONE_WITHIN_S)
        assert not _still_running(leader), "the agent outlived a SIGKILL of its holder"
        assert not _still_running(child), "the launcher's child outlived a SIGKILL of its holder"
    finally:
        holder.kill()
        holder.wait(timeout=GONE_WITHIN_S)
