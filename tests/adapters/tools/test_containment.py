"""Everything a command starts dies with it, also what left its process group by `setsid`.

Each test runs once per way of holding a command that this machine offers: a cgroup v1
`pids` group, a cgroup v2 group (killed through `cgroup.kill`), and the environment tag
used where no cgroup can be made. A `setsid` child (in a session of its own, so the group
kill misses it) must be gone after the command ends, after it is cancelled, and after the
agent's end of the deathwatch pipe closes (what the kernel does when the agent is killed;
tests/transports/acp/test_sandbox_exposure.py kills a real agent with SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools import env_tag, pids_cgroup
from steerable_bridge.adapters.tools.containment import Containment
from steerable_bridge.adapters.tools.deathwatch import arm, gated
from steerable_bridge.adapters.tools.local_env import run_argv

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(60)]

V1 = "/sys/fs/cgroup/pids"
V2 = "/sys/fs/cgroup/unified"


def _usable(base: str, marker: str) -> bool:
    return os.access(base, os.W_OK) and os.path.exists(os.path.join(base, marker))


HOLDERS = [
    pytest.param(
        V1,
        id="cgroup-v1",
        marks=pytest.mark.skipif(
            not _usable(V1, "cgroup.procs"), reason="no writable cgroup v1 pids hierarchy"
        ),
    ),
    pytest.param(
        V2,
        id="cgroup-v2",
        marks=pytest.mark.skipif(
            not _usable(V2, "cgroup.subtree_control"), reason="no writable cgroup v2 at " + V2
        ),
    ),
    pytest.param(None, id="env-tag"),
]


@pytest.fixture(params=HOLDERS)
def holder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Make `pids_cgroup` use one hierarchy (or none: the environment tag); which."""
    base: str | None = request.param
    monkeypatch.setattr(pids_cgroup, "_base", [base])
    return base


def our_cgroups(base: str | None) -> list[str]:
    if base is None:
        return []
    prefix = f"steerable-bridge-{os.getpid()}-"
    return [name for name in os.listdir(base) if name.startswith(prefix)]


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def gone(pid: int) -> bool:
    with anyio.move_on_after(10):
        while live(pid):  # noqa: ASYNC110 - the kernel's state is the event
            await anyio.sleep(0.01)
    return not live(pid)


def escaping(pidfile: Path, then: str = "") -> str:
    """A shell command whose child leaves for a session of its own and records its pid."""
    inner = f"echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; exec sleep 1000"
    return (
        f"setsid sh -c '{inner}' </dev/null >/dev/null 2>&1 &"
        f" while [ ! -e {pidfile} ]; do sleep 0.01; done; {then}"
    )


def escaped(pidfile: Path) -> int:
    pid = int(pidfile.read_text())
    assert os.getsid(pid) == pid  # it did leave the command's session and group
    return pid


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        if live(pid):
            os.kill(pid, signal.SIGKILL)


async def test_a_setsid_child_dies_when_its_command_ends(
    holder: str | None, tmp_path: Path, cleanup: list[int]
) -> None:
    pidfile = tmp_path / "child.pid"
    argv = ["/bin/sh", "-c", escaping(pidfile, then=f"ps -o pid= -p $(cat {pidfile})")]
    result = await run_argv(argv, cwd=str(tmp_path), timeout_s=20, output_limit=10_000)
    pid = int(pidfile.read_text())
    cleanup.append(pid)
    assert result.exit_code == 0 and str(pid) in result.output  # it ran beside the command
    assert os.getsid(pid) == pid or not live(pid)
    assert await gone(pid)
    assert our_cgroups(holder) == []


async def test_a_setsid_child_dies_when_its_command_is_cancelled(
    holder: str | None, tmp_path: Path, cleanup: list[int]
) -> None:
    pidfile = tmp_path / "child.pid"
    argv = ["/bin/sh", "-c", escaping(pidfile, then="sleep 1000")]
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await run_argv(argv, cwd=str(tmp_path), timeout_s=60, output_limit=100)

        tg.start_soon(run)
        with anyio.fail_after(20):
            while not pidfile.exists():  # noqa: ASYNC110 - the file is the event
                await anyio.sleep(0.01)
        pid = escaped(pidfile)
        cleanup.append(pid)
        tg.cancel_scope.cancel()
    assert await gone(pid)


async def test_a_setsid_child_dies_when_the_agent_dies(
    holder: str | None, tmp_path: Path, cleanup: list[int]
) -> None:
    pidfile = tmp_path / "child.pid"
    held = Containment.open()
    assert (held.cgroup is None) == (holder is None)
    program = held.argv(["/bin/sh", "-c", escaping(pidfile, then="sleep 1000")])
    process = await anyio.open_process(
        gated(program),
        env=held.environ(None),
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        watch = await arm(process, held)
        with anyio.fail_after(20):
            while not pidfile.exists():  # noqa: ASYNC110 - the file is the event
                await anyio.sleep(0.01)
        pid = escaped(pidfile)
        cleanup.append(pid)
        if held.tag is not None:
            assert pid in env_tag.tagged(held.tag)
        assert watch.process is not None and watch.process.stdin is not None
        await watch.process.stdin.aclose()  # what the kernel does when the agent dies
        assert await gone(pid)
        with anyio.fail_after(10):
            await process.wait()
        await watch.release()
    finally:
        if process.returncode is None:
            process.kill()
        await held.close()
        await process.aclose()
    if held.cgroup is not None:
        assert our_cgroups(holder) == []  # the companion or close() removed it
