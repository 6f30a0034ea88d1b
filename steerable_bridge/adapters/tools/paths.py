"""Workspace confinement: which paths a session's tools may touch, and opening them safely.

A `Workspace` is the session's cwd plus any additional directories the client granted.
`resolve(path)` turns what a model wrote (relative to the cwd, or absolute) into a real,
absolute path inside one of those roots, and refuses with `WorkspaceError("outside_workspace")`
anything that is not: `..` climbing out, absolute paths elsewhere, and symlinks whose
target lies outside (a symlink inside that points inside is fine — it is resolved, never
followed blindly), and refuses with `agent_state` the agent's own files inside the roots
(its store, approvals, spill; `agent_files.py`). `open_file` closes the gap between that
check and the use: it opens the parent directory without following a final symlink,
opens the file relative to that directory fd with `O_NOFOLLOW`, and re-checks where the
descriptor really points (`/proc/self/fd`, or an `fstat` comparison elsewhere), so a file
swapped for a symlink between check and use is refused rather than followed. Only regular
files are opened: a FIFO, socket or device is refused (`not_a_regular_file`) before the
open, and the open itself uses `O_NONBLOCK` and checks the descriptor, so one swapped in
meanwhile cannot block it either. Nothing here does any other I/O.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from steerable_bridge.adapters.tools.agent_files import AGENT_FILES, AgentFiles
from steerable_bridge.adapters.tools.file_names import on_disk
from steerable_bridge.adapters.tools.reading import check_regular, not_regular, special_kind
from steerable_bridge.runtime.ports.environment import WorkspaceError

__all__ = ["Workspace", "os_error"]

_PROC_FD = "/proc/self/fd"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class Workspace:
    """The roots one session may touch; `cwd` is the first and the base of relative paths."""

    cwd: str
    roots: tuple[str, ...]
    private: AgentFiles = field(default=AGENT_FILES, compare=False, repr=False)
    """The agent's own files, refused even inside the roots (the process's by default)."""

    @classmethod
    def of(
        cls, cwd: str, additional: Iterable[str] = (), *, private: AgentFiles = AGENT_FILES
    ) -> Workspace:
        """A workspace over `cwd` and `additional` directories (made absolute and real)."""
        if not os.path.isabs(cwd):
            raise WorkspaceError(
                "invalid_workspace", f"the session cwd {cwd!r} must be an absolute path"
            )
        real_cwd = os.path.realpath(cwd)
        roots = [real_cwd]
        for extra in additional:
            real = os.path.realpath(os.path.join(real_cwd, extra))
            if real not in roots:
                roots.append(real)
        return cls(cwd=real_cwd, roots=tuple(roots), private=private)

    def contains(self, real_path: str) -> bool:
        """True when an already-resolved path lies inside one of the roots."""
        return any(_inside(real_path, root) for root in self.roots)

    def resolve(self, path: str) -> str:
        """The real absolute path for `path`, or `WorkspaceError("outside_workspace")`."""
        if "\x00" in path:
            raise WorkspaceError("invalid_path", "the path contains a NUL byte; fix the path")
        path = on_disk(path, self.cwd)  # a name shown with \xNN escapes (`file_names.py`)
        joined = os.path.join(self.cwd, os.path.expanduser(path or "."))
        real = os.path.realpath(joined)
        if not self.contains(real):
            raise self._outside(path, via_link=self.contains(os.path.normpath(joined)))
        refused = self.private.refusal(real, path)
        if refused is not None:
            raise refused
        return real

    def display(self, real_path: str) -> str:
        """A short form for titles: relative to the cwd when inside it."""
        if _inside(real_path, self.cwd):
            return os.path.relpath(real_path, self.cwd)
        return real_path

    def _outside(self, path: str, *, via_link: bool = False) -> WorkspaceError:
        where = ", ".join(self.roots)
        how = " through a symbolic link" if via_link else ""
        return WorkspaceError(
            "outside_workspace",
            f"{path!r} leads outside the workspace{how}; only paths under {where} may be used"
            " — use a path inside the project",
        )

    # -- opening without races ---------------------------------------------------------------

    def open_file(self, real_path: str, flags: int, mode: int = 0o666) -> int:
        """Open a path `resolve` returned; refuses a symlink swapped in after the check."""
        parent, name = os.path.split(real_path)
        if not name:
            raise WorkspaceError("is_a_directory", f"{real_path} is a directory, not a file")
        dir_fd = self.open_dir(parent)
        try:
            _refuse_special(name, dir_fd, real_path)
            try:
                fd = os.open(
                    name, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
                )
            except OSError as err:
                raise os_error(real_path, err) from err
        finally:
            os.close(dir_fd)
        try:
            self._check_fd(fd, real_path)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise WorkspaceError(
                    "is_a_directory", f"{real_path} is a directory; use list_dir to see inside it"
                )
            check_regular(fd, real_path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_dir(self, real_dir: str) -> int:
        """Open a resolved directory without following a link; refuses one that moved out."""
        try:
            fd = os.open(real_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            if err.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(real_dir):
                err = OSError(errno.ELOOP, os.strerror(errno.ELOOP))
            raise os_error(real_dir, err) from err
        try:
            self._check_fd(fd, real_dir)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _check_fd(self, fd: int, expected: str) -> None:
        """Where the descriptor really points must still be inside the workspace."""
        actual: str | None = None
        try:
            actual = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            actual = None
        if actual is not None:
            if self.contains(actual):
                return
        else:  # no /proc: the object opened must be the one the resolved path names now
            opened = os.fstat(fd)
            try:
                named = os.stat(expected, follow_symlinks=False)
            except OSError:
                named = None
            if (
                named is not None
                and (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
                and self.contains(os.path.realpath(expected))
            ):
                return
        raise WorkspaceError(
            "outside_workspace",
            f"{expected} changed into a link leading outside the workspace while it was being"
            " opened; it was not touched",
        )


def _refuse_special(name: str, dir_fd: int, real_path: str) -> None:
    """Refuse a FIFO, socket or device before opening it (opening one can block, or act)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return  # missing (a write creates it) or unreadable: the open reports it
    if special_kind(mode) is not None:
        raise not_regular(real_path, mode)


def os_error(path: str, err: OSError) -> WorkspaceError:
    """The coded error (with its remedy) a tool reports for `err` on `path`."""
    if err.errno == errno.ENOENT:
        return WorkspaceError(
            "not_found", f"{path} does not exist; check the path with list_dir or glob"
        )
    if err.errno == errno.ELOOP:
        return WorkspaceError(
            "outside_workspace",
            f"{path} is a symbolic link that was swapped in after the path was checked;"
            " it was not followed",
        )
    if err.errno == errno.EISDIR:
        return WorkspaceError(
            "is_a_directory", f"{path} is a directory; use list_dir to see inside it"
        )
    if err.errno == errno.ENOTDIR:
        return WorkspaceError("not_a_directory", f"a parent of {path} is not a directory")
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return WorkspaceError(
            "disk_full", f"{path}: {err.strerror}; free some space (or raise the quota) and retry"
        )
    if err.errno in (errno.EACCES, errno.EPERM):
        return WorkspaceError("permission_denied", f"{path} is not accessible: {err.strerror}")
    return WorkspaceError("io_error", f"{path}: {err.strerror or err}")
