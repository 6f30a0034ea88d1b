"""A loopback port that refuses every connection, for tests of a server that is down.

`refusing_port()` binds 127.0.0.1 on an OS-picked port and never listens, for as long as
its block runs: a connection gets ECONNREFUSED at once, and no other process can bind the
port meanwhile. The port picked by binding and closing at once, as these tests did, could be
taken by another test's server before the connection was tried (many suites share this
machine), which then answered instead of refusing.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["refusing_port"]


@contextmanager
def refusing_port() -> Iterator[int]:
    """The port number; it refuses connections until the block ends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
