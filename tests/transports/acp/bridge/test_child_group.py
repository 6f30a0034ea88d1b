"""No process `serve --acp-agent` started outlives it, nor outlives the child it belongs to.

The child here is a launcher like `codex-acp`'s node script: it runs the real agent (our own
`acp` on a scripted model) as its child, and one more process, like an agent's own helper,
that would run on for minutes by itself (as codex-acp's binary does once its launcher is
gone). Ending `serve` with SIGTERM must end all three; a launcher that dies on its own must
not leave its processes behind when the bridge starts the next one. Each process's end is
waited for on its pidfd (readable once it has exited), bounded.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.transports.acp.bridge.harness import (
    child_command,
    run_input,
    serving,
    text_of,
    write_script,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LAUNCHER = """\
import subprocess, sys
helper = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL
)
with open(sys.argv[1], "a") as pids:
    pids.write(f"{helper.pid}\\n")
sys.exit(subprocess.run(sys.argv[2:]).returncode)
"""
GONE_WITHIN_S = 20.0
"""Safety bound on waiting for a process to be gone (it is expected within a few seconds)."""


def _wait_gone(pids: list[int]) -> list[int]:
    """Those of `pids` still running once the bound passed (empty as soon as all exited)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    left = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
        if not ready:
            left.append(pid)
    return left


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _launched(tmp: Path) -> tuple[str, Path]:
    launcher = tmp / "launcher.py"
    launcher.write_text(LAUNCHER, encoding="utf-8")
    pids = tmp / "helpers.txt"
    agent = child_command(write_script(tmp, [{"text": "up"}], loop=True))
    return shlex.join([sys.executable, str(launcher), str(pids)]) + " " + agent, pids


def _helpers(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()]


def test_serve_ended_by_sigterm_leaves_no_process_of_its_child_agent(tmp_path: Path) -> None:
    command, pids = _launched(tmp_path)
    with serving(["--storage", "memory"], command) as bridge:
        events = bridge.run(run_input("t1", "r1", "hi"))
        assert text_of(events) == "up", events
        launcher = bridge.child_pid()
        started = [launcher, *_children(launcher)]  # the launcher, the agent, the helper
        assert len(started) == 3, started
    # `serving` sent SIGTERM and saw serve exit
    assert bridge.process.returncode is not None
    assert _wait_gone(started) == [], "left running after serve exited"
    assert _wait_gone(_helpers(pids)) == []


def test_a_launcher_that_dies_leaves_nothing_when_the_next_agent_starts(tmp_path: Path) -> None:
    command, pids = _launched(tmp_path)
    with serving(["--storage", "memory"], command) as bridge:
        assert text_of(bridge.run(run_input("t1", "r1", "hi"))) == "up"
        first = bridge.child_pid()
        (helper,) = _helpers(pids)
        os.kill(first, signal.SIGKILL)  # the launcher only: its agent and helper run on
        assert _wait_gone([helper]) == [], "the dead launcher's helper was left running"
        events = bridge.run(run_input("t2", "r2", "again"))
        assert text_of(events) == "up", events  # the next start serves
        assert bridge.child_pid() != first
