"""The child agent's process, leader of a process group of its own, and how the group ends.

Many ACP agents are launchers: `codex-acp` is a node script that runs the real binary as its
child, `npx` / `uvx` start the package they fetch. Ending only the process we started leaves
the real agent running, reparented to init — and codex-acp's binary does not exit when its
stdin closes, so it would run on for good. `agent_process(argv, ...)` therefore starts the
command (stdin / stdout piped for JSON-RPC, stderr shared with ours) with
`start_new_session`, so everything it starts is in its group, and leaving the block ends the
group: stdin closed and up to `EXIT_GRACE_S` for the agent to exit by itself, then SIGTERM to
the whole group and the same wait for it to be gone, then SIGKILL — done even when the
leader has already exited (a crashed launcher leaves its children behind). `exited(process)`
returns once the leader has exited — on its pidfd where there is one, since asyncio's
`wait()` also waits for the pipes, which a launcher's children still hold. `signal_group`
sends a signal to the group while it has a member (`ChildAgent.stop` / `kill`). A new session
also keeps a terminal's Ctrl-C away from the agent: `serve` ends it in order instead. A
process that leaves the group (`setsid`, a double fork) is not reached. When `serve` itself
is killed with SIGKILL, the companion of `deathwatch.py`, started beside the agent, ends the
group instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from asyncio.subprocess import PIPE, Process
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio

from steerable_bridge.transports.acp.bridge.deathwatch import deathwatch

__all__ = ["EXIT_GRACE_S", "agent_process", "exited", "group_alive", "signal_group"]

EXIT_GRACE_S = 2.0
"""How long each step of the end (stdin closed, SIGTERM) waits before the next."""
POLL_S = 0.05
"""How often the end looks whether a group whose leader exited still has members."""


@asynccontextmanager
async def agent_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    limit: int,
) -> AsyncIterator[Process]:
    """The started agent (see the module docstring); its whole group ends with the block."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=PIPE,
        stdout=PIPE,
        stderr=None,
        env=dict(env),
        cwd=cwd,
        limit=limit,
        start_new_session=True,
    )
    try:
        async with deathwatch(process.pid, grace_s=EXIT_GRACE_S):
            try:
                yield process
            finally:
                with anyio.CancelScope(shield=True):
                    await end_group(process)
    finally:
        if process.returncode is None:  # the deathwatch's start was cancelled: end it still
            with anyio.CancelScope(shield=True):
                await end_group(process)


async def exited(process: Process) -> None:
    """Return once the process has exited (its children may still hold its pipes)."""
    if process.returncode is not None:
        return
    try:
        pidfd = os.pidfd_open(process.pid)
    except ProcessLookupError:  # reaped since: asyncio has its exit status
        return
    except (AttributeError, OSError):  # no pidfd here (not Linux)
        await process.wait()
        return
    try:
        if process.returncode is None:  # else the pid was reaped just before it was opened
            await anyio.wait_readable(pidfd)  # readable once the process has exited
    finally:
        os.close(pidfd)


def signal_group(process: Process, sig: int) -> bool:
    """Send `sig` to the process's group; False when no process of it is left."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user: the rest got the signal
        return True
    return True


def group_alive(process: Process) -> bool:
    """Whether any process of the group is still there (the leader included)."""
    return signal_group(process, 0)


async def end_group(process: Process, grace_s: float = EXIT_GRACE_S) -> None:
    """Close stdin, then SIGTERM and SIGKILL the group, each after `grace_s` (bounded)."""
    stdin = process.stdin
    if stdin is not None:
        with contextlib.suppress(Exception):
            stdin.close()
    try:
        if await _gone(process, grace_s):
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not signal_group(process, sig) or await _gone(process, grace_s):
                return
    finally:
        # asyncio learns of the exit from its child watcher: wait (bounded) until it has,
        # so no watcher callback is left for a loop that may close once the block is left
        with anyio.move_on_after(grace_s):
            await process.wait()


async def _gone(process: Process, within: float) -> bool:
    """Wait (at most `within`) until the leader has exited and its group is empty."""
    with anyio.move_on_after(within):
        await exited(process)
        for _ in range(int(within / POLL_S) + 1):  # no event tells when the others are gone
            if not group_alive(process):
                return True
            await anyio.sleep(POLL_S)
    return False
