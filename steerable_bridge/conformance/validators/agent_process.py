"""The agent under `check acp` as an operating-system process group, started and ended whole.

`agent_process(command, env=..., cwd=..., stderr=...)` starts the agent in a session of its
own (`start_new_session=True`, so it leads a new process group) with piped stdin / stdout,
and on exit ends the whole group, not just the process it started: it closes stdin and
gives the agent `grace` seconds to leave, then sends SIGTERM to the group, then SIGKILL.
Agents launched through a wrapper (an npm launcher that execs a native binary, a shell
script) otherwise leave their real process running after the checks; codex-acp's launcher
is one. The `acp` SDK's own spawner does not start a new session, which is why this module
spawns the process itself and hands the pipes to the SDK's `ClientSideConnection`. POSIX
only. Never raises on shutdown; `survivors` says whether any process of the group was still
running when the grace period ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

import anyio

__all__ = ["AgentProcess", "agent_process"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AgentProcess:
    """The started agent and, after exit, whether its group had to be signalled."""

    process: asyncio.subprocess.Process
    survivors: bool = False


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its credentials; nothing more we can do
        return True
    return True


async def _group_gone(pgid: int, within: float) -> bool:
    with anyio.move_on_after(within):
        # No event tells when the last member of a process group is gone: poll, bounded.
        while _signal_group(pgid, 0):  # noqa: ASYNC110
            await anyio.sleep(0.05)
        return True
    return False


@contextlib.asynccontextmanager
async def agent_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    stderr: IO[bytes],
    grace: float = 2.0,
) -> AsyncIterator[AgentProcess]:
    """Start `command` as the leader of a new process group; end the whole group on exit."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        limit=64 * 1024 * 1024,  # agents send whole files in one line
    )
    handle = AgentProcess(process)
    pgid = process.pid
    try:
        yield handle
    finally:
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    process.stdin.close()
            with anyio.move_on_after(grace):
                await process.wait()
            handle.survivors = _signal_group(pgid, 0)
            if handle.survivors:
                log.info("agent %s: ending its process group %d", command[0], pgid)
                _signal_group(pgid, signal.SIGTERM)
                if not await _group_gone(pgid, grace):
                    _signal_group(pgid, signal.SIGKILL)
                    await _group_gone(pgid, grace)
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with anyio.move_on_after(grace):
                    await process.wait()
