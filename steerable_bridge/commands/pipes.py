"""What a command does when the reader of its output goes away (`steerable-bridge ... | head`).

`silence_output()` points stdout and stderr at /dev/null, so the writes still buffered, and
the interpreter's flush at exit, cannot raise `BrokenPipeError` again; the CLI then exits
quietly with `CLOSED_PIPE_EXIT` (141: 128 + SIGPIPE, what a shell reports for a tool that a
closed pipe stopped). It is called once the pipe is known to be closed, never before.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CLOSED_PIPE_EXIT", "silence_output"]

CLOSED_PIPE_EXIT = 141


def silence_output() -> None:
    """Send whatever stdout and stderr still write to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):  # replaced by a non-file stream (tests, embedding)
                continue
    finally:
        os.close(devnull)
