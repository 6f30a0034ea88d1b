"""Per-session owner locks: which process may write a session while it runs a turn.

One lock file per session in a directory next to the database (`sessions.db` →
`sessions.db-owners/<hash of the id>.lock`), held with an exclusive, non-blocking
`fcntl.flock` for the length of a turn. The kernel drops the lock when its holder exits in
any way — kill -9 included — so a dead owner never blocks anyone, and no liveness guess is
ever needed to decide ownership. The holder writes who it is (pid, host, start time) into
the file so the process that is refused can name it; the text is informational only.
POSIX only (fcntl); on a network file system flock may not be honoured across machines.
The SQLite store (`sqlite.py`) uses it; it never touches the database itself.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from pathlib import Path

from steerable_bridge.runtime.ports.storage import SessionOwned, storage_full

__all__ = ["HeldLock", "OwnerLocks"]


class HeldLock:
    """A lock this process holds; `release()` it exactly once."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    def release(self, *, unlink: bool = False) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if unlink:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            else:
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor drops the flock


class OwnerLocks:
    """The owner locks of one store."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, session_id: str) -> Path:
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:32]
        return self.directory / f"{digest}.lock"

    def acquire(self, session_id: str) -> HeldLock:
        """Take the session's lock now or raise `SessionOwned` naming the holder."""
        path = self.path(session_id)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            _raise_if_full(self.directory, err)
            raise
        for _ in range(5):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as err:
                _raise_if_full(self.directory, err)
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _describe(_read(fd))
                os.close(fd)
                raise SessionOwned(session_id, holder) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # deleted and re-created while we waited: lock the new file
                os.close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, _identity(session_id), 0)
            except OSError as err:  # the lock is held; who holds it is only for display
                if not _is_full(err):
                    os.close(fd)
                    raise
            return HeldLock(fd, path)
        raise SessionOwned(session_id, "another process that keeps re-creating its lock file")

    def holder(self, session_id: str) -> str | None:
        """Who seems to hold the lock now (for display only; never used to decide)."""
        try:
            text = self.path(session_id).read_bytes()
        except FileNotFoundError:
            return None
        info = _parse(text)
        if info is None:
            return None
        pid, host = info.get("pid"), info.get("host")
        if host == socket.gethostname() and isinstance(pid, int) and not _alive(pid):
            return None
        return _describe(text)


def _is_full(err: OSError) -> bool:
    return err.errno in (errno.ENOSPC, errno.EDQUOT)


def _raise_if_full(directory: Path, err: OSError) -> None:
    if _is_full(err):
        raise storage_full(str(directory), err.strerror or str(err)) from None


def _identity(session_id: str) -> bytes:
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "session_id": session_id,
    }
    return json.dumps(info).encode()


def _read(fd: int) -> bytes:
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return b""


def _parse(text: bytes) -> dict[str, object] | None:
    try:
        info = json.loads(text)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _describe(text: bytes) -> str:
    info = _parse(text)
    if info is None:
        return "another process (it has not written its id yet)"
    return f"process {info.get('pid')} on {info.get('host')} (since {info.get('since')})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
