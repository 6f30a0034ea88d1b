"""A command's processes found by a variable they inherit, where no cgroup can hold them.

When this process may not create cgroups (`pids_cgroup.available()` is false: an
unprivileged user without a delegated cgroup v2 subtree) and bubblewrap's PID namespace is
not there either, a child that calls `setsid` or double-forks leaves the command's process
group and would outlive it. So such a command starts with `STEERABLE_COMMAND_TAG=<this
pid>-<n>` in its environment (`tag()`): every process it starts inherits the variable,
whatever session or group it moves to, and `kill_tagged(value)` SIGKILLs every process
whose `/proc/PID/environ` holds it — when the command ends or is cancelled, and, through
`KILL_SCRIPT` in `deathwatch.py`'s companion, when this process dies. A process that
empties its own environment (`env -i`) escapes this; a cgroup or the sandbox is the
stronger bound, which is why this is only the fallback. The variable names nothing secret.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal

import anyio

__all__ = ["KILL_SCRIPT", "NAME", "kill_tagged", "tag", "tagged"]

NAME = "STEERABLE_COMMAND_TAG"
_counter = itertools.count()
_ROUNDS = 20
_POLL_S = 0.02

KILL_SCRIPT = (
    "n=0; while [ $n -lt 5 ]; do hit=; for f in /proc/[0-9]*/environ; do"
    ' if grep -qzx "' + NAME + '=$2" "$f" 2>/dev/null; then p=${f#/proc/};'
    ' kill -9 "${p%/environ}" 2>/dev/null; hit=1; fi; done;'
    ' [ -z "$hit" ] && break; n=$((n+1)); done'
)
"""`sh -c KILL_SCRIPT sh _ VALUE`: SIGKILL every process tagged VALUE (a few rounds)."""


def tag() -> str:
    """A value no other command of any process shares."""
    return f"{os.getpid()}-{next(_counter)}"


def tagged(value: str) -> list[int]:
    """Pids of live processes (not this one) whose environment holds the tag `value`."""
    needle = f"{NAME}={value}".encode()
    found: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:
            continue
        if needle in variables:
            found.append(int(entry))
    return found


async def kill_tagged(value: str) -> bool:
    """SIGKILL every process tagged `value` until none is left (bounded); whether none is."""
    with anyio.move_on_after(1.0):
        for _ in range(_ROUNDS):
            pids = await anyio.to_thread.run_sync(tagged, value)
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            await anyio.sleep(_POLL_S)
    return not tagged(value)
