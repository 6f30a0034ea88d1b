"""Reading a file without hanging on it or holding more of it than was asked for.

The read-only tools need no approval, so what they open must never block and what they read
must stay small whatever the file is. `special_kind(mode)` names what is not a regular file
(a FIFO, a socket, a device) and `not_regular(path, mode)` is the coded refusal for it;
callers check before opening and again on the descriptor (`check_regular`), which they open
with `O_NONBLOCK` so that even a FIFO swapped in between does not block the open.
`read_window` streams lines `first .. first + limit - 1` of an open file in pieces of at most
`PIECE` bytes: lines before the window are skipped without being held, a line longer than
`max_line_bytes` keeps its start and a marker saying it was cut, and the whole answer stops
at `max_bytes` with a marker too, so no path materialises a large file or one enormous line.
It runs in a worker thread and looks at `stop` between pieces (`stoppable.py` sets it when
the caller is cancelled), so a read the client walked away from ends promptly.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from typing import BinaryIO

from steerable_bridge.runtime.ports.environment import WorkspaceError

__all__ = [
    "PIECE",
    "bounded_lines",
    "check_regular",
    "not_regular",
    "open_regular_path",
    "read_window",
]

PIECE = 64 * 1024
"""The most one `readline` call takes; a longer line arrives in several pieces."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is ("a FIFO (named pipe)", ...), else None."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: str, mode: int) -> WorkspaceError:
    """The refusal for a path that is not a regular file (code `not_a_regular_file`)."""
    kind = special_kind(mode) or "not a regular file"
    return WorkspaceError(
        "not_a_regular_file",
        f"{path} is {kind}, not a regular file; it was not opened (reading it could block or"
        " never end) — use a regular file",
    )


def check_regular(fd: int, path: str) -> None:
    """Refuse an open descriptor that is not a regular file (or a directory: callers that
    opened one report `is_a_directory` themselves)."""
    mode = os.fstat(fd).st_mode
    if special_kind(mode) is not None:
        raise not_regular(path, mode)


def open_regular_path(path: str) -> int:
    """Open `path` for reading without following a final link or blocking; regular only."""
    try:
        mode = os.stat(path, follow_symlinks=False).st_mode
    except OSError as err:
        raise WorkspaceError("io_error", f"{path}: {err.strerror or err}") from err
    if not stat.S_ISREG(mode):
        raise not_regular(path, mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise WorkspaceError("io_error", f"{path}: {err.strerror or err}") from err
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _cut_marker(number: int, max_line_bytes: int) -> bytes:
    return f" [line {number} is longer than {max_line_bytes} bytes; the rest is cut]\n".encode()


def _stopped_marker(number: int, max_bytes: int) -> bytes:
    return (
        f"\n[stopped after {max_bytes} bytes, in line {number}; read on from line {number + 1}]\n"
    ).encode()


def _stopped() -> WorkspaceError:
    return WorkspaceError("cancelled", "the read was cancelled; nothing was returned")


def bounded_lines(
    handle: BinaryIO, max_line_bytes: int, stop: threading.Event | None = None
) -> Iterator[tuple[bytes, bool]]:
    """`(line, cut)` for each line of `handle`: at most its first `max_line_bytes` bytes
    (with the newline when it fits) and whether the rest was skipped; never more than
    `max_line_bytes + PIECE` bytes held. Raises `WorkspaceError("cancelled")` once
    `stop` is set."""
    current = bytearray()
    cut = False
    while True:
        if stop is not None and stop.is_set():
            raise _stopped()
        piece = handle.readline(PIECE)
        if not piece:
            if current or cut:
                yield bytes(current), cut
            return
        if not cut:
            room = max_line_bytes - len(current)
            current += piece[:room]
            cut = len(piece) > room
        if piece.endswith(b"\n"):
            yield bytes(current), cut
            current.clear()
            cut = False


def read_window(
    handle: BinaryIO,
    *,
    first: int,
    limit: int | None,
    max_bytes: int,
    max_line_bytes: int,
    stop: threading.Event | None = None,
) -> bytes:
    """Lines `first ..` (1-based) for `limit` lines (None: to the end), bounded as the
    module docstring says. Raises `WorkspaceError("cancelled")` once `stop` is set."""
    out = bytearray()
    lines = bounded_lines(handle, max_line_bytes, stop)
    for number, (text, cut) in enumerate(lines, start=1):
        if number < first:
            continue
        if limit is not None and number >= first + limit:
            break
        if cut:
            text += _cut_marker(number, max_line_bytes)
        if len(out) + len(text) > max_bytes:
            out += text[: max_bytes - len(out)] + _stopped_marker(number, max_bytes)
            break
        out += text
    return bytes(out)
