"""A per-command pids cgroup: the bound on process count that also holds for root.

`RLIMIT_NPROC` (see `bwrap.py`) does not apply to root, so when this process may create
cgroups in a `pids` hierarchy (cgroup v1 `/sys/fs/cgroup/pids`, or a v2 tree whose root
delegates `pids`) each sandboxed command gets a cgroup of its own with `pids.max` set:
`open_cgroup(limit)` creates it and returns its folder (None when no hierarchy is
writable — then the PID namespace and the command's time limit are the bound),
`enter_argv(folder, argv)` prefixes a command so its first process joins the group before
it starts anything, and `remove_cgroup(folder)` deletes it once the command's processes
are gone (bounded; a folder still busy is left for the next start to sweep).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os

import anyio

__all__ = ["available", "enter_argv", "open_cgroup", "remove_cgroup"]

log = logging.getLogger(__name__)

_PREFIX = "steerable-bridge-"
_counter = itertools.count()
_base: list[str | None] = []  # found once per process


def _find_base() -> str | None:
    for candidate in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        if not os.access(candidate, os.W_OK):
            continue
        if candidate.endswith("/pids") and os.path.exists(os.path.join(candidate, "cgroup.procs")):
            return candidate  # cgroup v1
        try:
            with open(os.path.join(candidate, "cgroup.subtree_control")) as handle:
                if "pids" in handle.read().split():
                    return candidate
        except OSError:
            continue
    return None


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
    """Whether this process can bound commands with a pids cgroup."""
    return _base_dir() is not None


def open_cgroup(limit: int) -> str | None:
    """A fresh cgroup allowing `limit` processes, or None when none can be made here."""
    base = _base_dir()
    if base is None:
        return None
    folder = os.path.join(base, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(folder)
        with open(os.path.join(folder, "pids.max"), "w") as handle:
            handle.write(str(limit))
    except OSError as error:
        log.info("no pids cgroup for this command (%s); the PID namespace bounds it", error)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        return None
    return folder


def enter_argv(folder: str, argv: list[str]) -> list[str]:
    """`argv`, started by a shell that first moves itself into the cgroup `folder`."""
    script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    return ["/bin/sh", "-c", script, folder, *argv]


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
