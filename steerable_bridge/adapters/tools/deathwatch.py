"""A dead man's switch per command: everything it started dies if this process dies.

`local_env.run_argv` stops a command's whole process group when the command ends, times out
or is cancelled — but only while this process lives. Killed with SIGKILL, it runs no
cleanup, and the commands it started (a `sleep`, a dev server, a build) would run on,
reparented to init. So every command is started `gated(argv)`: a `/bin/sh` that waits for
one line on its stdin before it `exec`s the command (same pid, same process group, stdin
then /dev/null). `arm(process)` first starts the watch — a companion `/bin/sh` reading a
pipe whose only writer is this process, which sends SIGKILL to the command's group (and to
every process of its `containment.py` — its cgroup, or its environment tag — so a `setsid`
child dies too) when `read` returns, that is when this process has died for any reason and
the kernel closed the pipe — and only then opens the gate. Should this process die before
that, the gate reads end-of-file and exits (125) without running anything, so there is no
moment when a command runs unwatched. `Watch.release()` (after the group was stopped the
ordinary way) kills the companion first, so it never signals a group id that might since
have been reused. The companion runs in a session of its own (a terminal's Ctrl-C does not
reach it). A parent-death signal (`prctl(PR_SET_PDEATHSIG)`) was the alternative: it
reaches only the process that set it — the group's leader — not the rest of the group, and
anyio's `open_process` has no pre-exec hook to set it. tests/transports/acp/test_kill9.py
kills the agent with SIGKILL mid-command 50 times and finds nothing left.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from steerable_bridge.adapters.tools.env_tag import KILL_SCRIPT as TAG_KILL
from steerable_bridge.adapters.tools.pids_cgroup import KILL_SCRIPT as CGROUP_KILL

if TYPE_CHECKING:
    from steerable_bridge.adapters.tools.containment import Containment

__all__ = ["GATE_EXIT", "Watch", "arm", "gated", "resolved", "watch_group"]

log = logging.getLogger(__name__)

_SCRIPT = (
    'read -r _ ; [ -n "$0" ] && kill -9 -"$0" 2>/dev/null;'
    f' if [ -n "$1" ]; then {CGROUP_KILL}; fi; if [ -n "$2" ]; then {TAG_KILL}; fi'
)
"""`$0` is the group id, `$1` the command's cgroup and `$2` its environment tag (each may
be empty); `read` returns only when the pipe closes (nothing is ever sent)."""

_GATE = 'read -r _ || exit 125; exec "$@" </dev/null'
GATE_EXIT = 125
"""The gate's exit status when it was never opened (this process died first)."""

_REAP_S = 2.0


def gated(argv: list[str], env: Mapping[str, str] | None = None) -> list[str]:
    """`argv` behind the gate; start it with `stdin=PIPE` and call `arm` right after.

    The program is looked up here (on `env`'s PATH), so a missing one raises
    `FileNotFoundError` as a direct spawn would, instead of failing inside the gate."""
    return ["/bin/sh", "-c", _GATE, "sh", *resolved(argv, env)]


def resolved(argv: list[str], env: Mapping[str, str] | None = None) -> list[str]:
    """`argv` with its program looked up on `env`'s PATH; `FileNotFoundError` if missing."""
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    program = shutil.which(argv[0], path=path)
    if program is None:
        raise FileNotFoundError(errno.ENOENT, "no such program", argv[0])
    return [program, *argv[1:]]


async def arm(process: anyio.abc.Process, held: Containment | None = None) -> Watch:
    """Watch the gated `process`'s group (it leads one) and what else `held` holds it in,
    then let the command run."""
    with anyio.CancelScope(shield=True):
        cgroup, tag = (held.cgroup, held.tag) if held is not None else (None, None)
        watch = await watch_group(process.pid, cgroup, tag)
        if process.stdin is not None:
            with anyio.move_on_after(_REAP_S):
                gone = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
                with contextlib.suppress(*gone):  # it died already; the caller reaps it
                    await process.stdin.send(b"go\n")
                await process.stdin.aclose()
    return watch


@dataclass(slots=True)
class Watch:
    """The companion watching one process group."""

    process: anyio.abc.Process | None

    async def release(self) -> None:
        """Stop watching: kill the companion (never the group) and reap it. Bounded."""
        process = self.process
        if process is None:
            return
        self.process = None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_S):
            if process.stdin is not None:
                await process.stdin.aclose()
            await process.wait()


async def watch_group(pgid: int | None, cgroup: str | None = None, tag: str | None = None) -> Watch:
    """Start the companion for process group `pgid` (None: no group, as for an MCP server
    the SDK starts), the cgroup folder `cgroup` and the environment tag `tag` (see the
    module docstring).

    If it cannot start, the command still runs (logged): only an agent killed with
    SIGKILL would leave it behind."""
    if pgid is not None and pgid <= 1:  # never hand `kill` a group id meaning "every process"
        raise ValueError(f"not a process group a command leads: {pgid}")
    try:
        process = await anyio.open_process(
            ["/bin/sh", "-c", _SCRIPT, str(pgid or ""), cgroup or "", tag or ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,
        )
    except OSError as err:
        log.warning("could not start the watch on process group %s: %s", pgid, err)
        return Watch(None)
    return Watch(process)
