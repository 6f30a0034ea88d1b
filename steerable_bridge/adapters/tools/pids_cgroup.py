"""A cgroup per command: it holds everything the command starts, and can bound their count.

A process group does not hold a command's processes: one that calls `setsid` (or a daemon
that double-forks) leaves it, and killing the group misses it. A cgroup does hold them —
every child is born in its parent's cgroup and cannot leave it without write access to
the hierarchy — so when this process may create cgroups, every command gets one:
`open_cgroup(limit)` creates it (None when no hierarchy is writable here) and, when
`limit` is given and the hierarchy has the `pids` controller, sets `pids.max` — the bound
on process count that also holds for root, which `RLIMIT_NPROC` (`bwrap.py`) does not.
The hierarchies tried, in order: cgroup v2 at `/sys/fs/cgroup` delegating `pids`, cgroup
v1 `/sys/fs/cgroup/pids`, then any writable cgroup v2 (`/sys/fs/cgroup/unified` on hybrid
hosts) without a limit. `enter_argv(folder, argv)` prefixes a command so its first process
joins the group before it starts anything; `kill_cgroup(folder)` kills every member
(cgroup v2 `cgroup.kill`, else SIGKILL to each pid in `cgroup.procs` until none is left)
and `remove_cgroup(folder)` deletes it once empty (bounded; a folder still busy is left
for the next start to sweep). `KILL_SCRIPT` is the same kill for `deathwatch.py`'s
companion, which runs it when this process dies.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal

import anyio

__all__ = [
    "KILL_SCRIPT",
    "available",
    "enter_argv",
    "kill_cgroup",
    "limits",
    "open_cgroup",
    "remove_cgroup",
]

log = logging.getLogger(__name__)

_PREFIX = "steerable-bridge-"
_counter = itertools.count()
_base: list[str | None] = []  # found once per process
_KILL_ROUNDS = 100
_POLL_S = 0.01

KILL_SCRIPT = (
    'if [ -e "$1/cgroup.kill" ]; then echo 1 > "$1/cgroup.kill"; else n=0;'
    ' while [ $n -lt 100 ]; do p=$(cat "$1/cgroup.procs" 2>/dev/null);'
    ' [ -z "$p" ] && break; kill -9 $p 2>/dev/null; n=$((n+1)); done; fi;'
    ' n=0; while [ -d "$1" ] && ! rmdir "$1" 2>/dev/null && [ $n -lt 100 ];'
    " do sleep 0.02; n=$((n+1)); done"
)
"""`sh -c KILL_SCRIPT sh FOLDER`: kill every member of the cgroup, then remove it."""


def _find_base() -> str | None:
    v2 = "/sys/fs/cgroup"
    if _writable_v2(v2) and "pids" in _read(os.path.join(v2, "cgroup.subtree_control")).split():
        return v2
    v1 = "/sys/fs/cgroup/pids"
    if os.access(v1, os.W_OK) and os.path.exists(os.path.join(v1, "cgroup.procs")):
        return v1
    for candidate in (v2, "/sys/fs/cgroup/unified"):
        if _writable_v2(candidate):
            return candidate  # holds and kills, no count limit
    return None


def _writable_v2(folder: str) -> bool:
    return os.access(folder, os.W_OK) and os.path.exists(
        os.path.join(folder, "cgroup.subtree_control")
    )


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _base_dir() -> str | None:
    if not _base:
        _base.append(_find_base())
        if _base[0] is not None:
            _sweep(_base[0])
    return _base[0]


def _sweep(base: str) -> None:
    """Remove the groups of our processes that have exited (a live one's are left alone)."""
    try:
        names = [n for n in os.listdir(base) if n.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        owner = name[len(_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def available() -> bool:
    """Whether this process can hold commands in a cgroup of their own."""
    return _base_dir() is not None


def limits() -> bool:
    """Whether those cgroups can also bound a command's process count (`pids.max`)."""
    base = _base_dir()
    return base is not None and (
        base.endswith("/pids") or "pids" in _read(os.path.join(base, "cgroup.subtree_control"))
    )


def open_cgroup(limit: int | None = None) -> str | None:
    """A fresh cgroup (allowing `limit` processes where the hierarchy can count them), or
    None when none can be made here."""
    base = _base_dir()
    if base is None:
        return None
    folder = os.path.join(base, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(folder)
        if limit is not None and os.path.exists(os.path.join(folder, "pids.max")):
            with open(os.path.join(folder, "pids.max"), "w") as handle:
                handle.write(str(limit))
    except OSError as error:
        log.info("no cgroup for this command (%s); its process group is what is stopped", error)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        return None
    return folder


def enter_argv(folder: str, argv: list[str]) -> list[str]:
    """`argv`, started by a shell that first moves itself into the cgroup `folder`."""
    script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    return ["/bin/sh", "-c", script, folder, *argv]


def _members(folder: str) -> list[int]:
    return [int(pid) for pid in _read(os.path.join(folder, "cgroup.procs")).split()]


async def kill_cgroup(folder: str) -> bool:
    """SIGKILL every process in `folder` and wait (at most a second) until it is empty;
    whether it is. Processes that left by `setsid` or a double fork are members too."""
    with anyio.move_on_after(1.0):
        for _ in range(_KILL_ROUNDS):
            if not _kill_members(folder):
                return True
            await anyio.sleep(_POLL_S)
    return not _members(folder)


def _kill_members(folder: str) -> bool:
    """One round of SIGKILLs (cgroupfs answers at once); whether there was anyone to kill."""
    members = _members(folder)
    if not members:
        return False
    kill_file = os.path.join(folder, "cgroup.kill")
    if os.path.exists(kill_file):
        with contextlib.suppress(OSError), open(kill_file, "w") as handle:
            handle.write("1")
        return True
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return True


async def remove_cgroup(folder: str) -> None:
    """Delete `folder` once its processes have exited (waits at most a second)."""
    with anyio.move_on_after(1.0):
        while True:
            try:
                os.rmdir(folder)
                return
            except FileNotFoundError:
                return
            except OSError:
                await anyio.sleep(0.02)
    log.info("cgroup %s is still busy; it will be removed on a later start", folder)
