"""A companion that ends the agent's process group when `serve` itself dies unannounced.

`process.py` ends the agent's group when its block is left — which never happens when
`serve` is killed with SIGKILL (or by the OOM killer): the agent, and a launcher's real agent
under it, would run on for good. `deathwatch(pgid)` therefore starts, beside the agent, a
tiny `/bin/sh` in a session of its own that blocks reading a pipe whose only write end is
held by this process. When the block ends in order, `done` is written first and the
companion exits without touching anything (the group is already ended, and its number may be
reused); when this process dies, the kernel closes the pipe, the read sees end-of-file, and
the companion sends SIGTERM to the group, waits `EXIT_GRACE_S`, then SIGKILL. A host without
`/bin/sh` (Windows) gets no companion and a log line: there, a SIGKILL of `serve` leaves the
agent running as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from asyncio.subprocess import DEVNULL, PIPE, Process
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["WATCH_SCRIPT", "deathwatch"]

log = logging.getLogger(__name__)

WATCH_SCRIPT = (
    'read line; [ "$line" = done ] && exit 0; '
    'kill -s TERM -- "-$1" 2>/dev/null || exit 0; sleep "$2"; '
    'kill -s KILL -- "-$1" 2>/dev/null; '
    "exit 0"
)
"""The companion: $1 is the group, $2 the grace between SIGTERM and SIGKILL."""
END_WAIT_S = 2.0
"""How long an orderly end waits for the companion to read `done` and exit."""


@asynccontextmanager
async def deathwatch(pgid: int, *, grace_s: float) -> AsyncIterator[Process | None]:
    """Hold a companion that ends group `pgid` if this process dies inside the block."""
    shell = shutil.which("sh")
    watcher: Process | None = None
    if shell is None:
        log.warning("no /bin/sh here: a SIGKILL of this process would leave its agent running")
    else:
        try:
            watcher = await asyncio.create_subprocess_exec(
                shell,
                "-c",
                WATCH_SCRIPT,
                "steerable-deathwatch",
                str(pgid),
                f"{grace_s:g}",
                stdin=PIPE,
                stdout=DEVNULL,
                stderr=DEVNULL,
                start_new_session=True,  # a Ctrl-C to our terminal group must not end it
            )
        except OSError as error:
            log.warning("the agent's deathwatch could not start (%s): it runs without", error)
    try:
        yield watcher
    finally:
        if watcher is not None:
            with anyio.CancelScope(shield=True):
                await _dismiss(watcher)


async def _dismiss(watcher: Process) -> None:
    """Tell the companion the group was ended in order, and wait (bounded) for it to go."""
    stdin = watcher.stdin
    if stdin is not None:
        with contextlib.suppress(Exception):
            stdin.write(b"done\n")
            stdin.close()
    with anyio.move_on_after(END_WAIT_S):
        await watcher.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        watcher.kill()
    with anyio.move_on_after(END_WAIT_S):
        await watcher.wait()
