"""First frames first: requests on their way to their first response bytes, and the wait
streaming runs give them.

On a busy server one pass of the event loop runs every stream's ready work (with 100 runs
streaming, ~40 ms), and a new connection needs about five passes before its RUN_STARTED
goes out (accepted; its transport made; its request read; its app task run), each behind
every other run's streaming. `FIRST_FRAMES` counts those requests from the moment the
listening socket accepts them (`CountingSocket`, which `serve` listens on; the HTTP protocol
counts a later request on a kept-alive connection when its head is parsed; a connection
still in the socket's accept queue counts too, seen by a poll) until their
response starts or their connection is lost (`http_errors.py`); runs whose turn is streaming
ask it `pending()` before each event and, while any such request waits, `give_way()`: they
park (off the loop's ready queue, so its passes shrink to the new requests' own work) until
none waits or `GIVE_WAY_S` passed. A count that is never answered (a transport that failed
to be made) expires after `MAX_AGE_S`; and since a client can open connections that never
send a request (a browser's preconnect, a slowloris), each run keeps a `GiveWayBudget`: it
parks at most `BUDGET_S` plus `SHARE` of the time since its first frame, so no stream of
unanswered counts slows any run's streaming by more than that share. One per
process (the socket, the protocol and the app meet nowhere else); where nothing counts (the
app mounted in another server), nothing waits here. No I/O but that poll.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections import deque

import anyio

__all__ = [
    "BUDGET_S",
    "FIRST_FRAMES",
    "GIVE_WAY_S",
    "MAX_AGE_S",
    "QUEUED_WAIT_S",
    "SHARE",
    "CountingSocket",
    "FirstFrames",
    "GiveWayBudget",
]

GIVE_WAY_S = 0.1
"""The longest one wait of a streaming run's next event for new requests' first frames: long
enough to outlast their few loop passes (parked runs woken in the middle would fill those
passes again)."""
MAX_AGE_S = 0.5
"""A request still counted this long after it arrived is no longer waited for (a burst of
100 new connections at once takes a few hundred ms to answer them all on a busy machine;
a count nobody answers slows streaming to one event per `GIVE_WAY_S` for this long)."""
BUDGET_S = 0.1
"""What one run may park for others' first frames whatever its age (one `GIVE_WAY_S` wait)."""
SHARE = 0.2
"""And beyond that, this share of its time since its first frame."""
QUEUED_WAIT_S = 0.01
"""The longest a run waits for a connection the kernel holds to be accepted."""


class FirstFrames:
    """Requests waiting for their first response bytes (see the module docstring)."""

    def __init__(self, *, max_age_s: float = MAX_AGE_S) -> None:
        self._since: deque[float] = deque()
        """When each counted request arrived (`time.monotonic()`), oldest first."""
        self._max_age_s = max_age_s
        self._arrival: anyio.Event | None = None
        """Set when a request is counted (runs that saw a queued connection wait on it)."""
        self._clear: anyio.Event | None = None
        """Set when the count falls to 0 (streaming runs wait on it, bounded)."""
        self.accepts_counted = False
        """Whether a `CountingSocket` counts new connections in this process (else the
        protocol counts them when they are made)."""
        self._listeners: select.poll | None = None
        """The counting sockets, polled for connections the kernel holds, not accepted yet."""
        self._listening = 0

    def listen_on(self, fd: int) -> None:
        """Also count the connections waiting in `fd`'s accept queue (a listening socket)."""
        if self._listeners is None:
            self._listeners = select.poll()
        self._listeners.register(fd, select.POLLIN)
        self._listening += 1

    def stop_listening(self, fd: int) -> None:
        if self._listeners is not None:
            with contextlib.suppress(KeyError):
                self._listeners.unregister(fd)
                self._listening -= 1

    def arrived(self) -> None:
        self._since.append(time.monotonic())
        arrival, self._arrival = self._arrival, None
        if arrival is not None:
            arrival.set()

    def answered(self) -> None:
        """One counted request's response started (or it is gone)."""
        since = self._since
        if since:
            since.popleft()
            if not since:
                self._wake()

    def pending(self) -> bool:
        """Whether a request younger than `max_age_s` waits for its first frame, or a
        connection waits to be accepted (one poll, no accept: the loop accepts it on its
        next pass, and the runs that give way make that pass short)."""
        since = self._since
        if not since:
            return self._queued()
        oldest = time.monotonic() - self._max_age_s
        while since and since[0] < oldest:
            since.popleft()
        if since:
            return True
        self._wake()
        return self._queued()

    def _queued(self) -> bool:
        listeners = self._listeners
        if listeners is None or not self._listening:
            return False
        return any(mask & select.POLLIN for _, mask in listeners.poll(0))

    async def give_way(self, max_s: float = GIVE_WAY_S) -> None:
        """Wait until no request waits for its first frame, at most `max_s` — and for a
        connection not accepted yet only until it is, at most `QUEUED_WAIT_S` (a loop that
        stopped accepting, out of file descriptors, must not hold every stream)."""
        with anyio.move_on_after(max_s):
            if not self._since:
                if self._arrival is None:
                    self._arrival = anyio.Event()
                with anyio.move_on_after(QUEUED_WAIT_S):
                    await self._arrival.wait()
                if not self._since:
                    return
            if self._clear is None:
                self._clear = anyio.Event()
            await self._clear.wait()

    def _wake(self) -> None:
        clear, self._clear = self._clear, None
        if clear is not None:
            clear.set()


class GiveWayBudget:
    """How long one run may still park for others' first frames: `BUDGET_S` plus `SHARE` of
    its time since `began` (its first frame), less what it parked already. Bounds what
    requests that are counted but never answered cost a stream."""

    __slots__ = ("began", "parked")

    def __init__(self, began: float) -> None:
        self.began = began
        self.parked = 0.0

    def allows(self, now: float) -> bool:
        return self.parked < BUDGET_S + SHARE * (now - self.began)

    def spent(self, seconds: float) -> None:
        self.parked += seconds


FIRST_FRAMES = FirstFrames()
"""The process's count (`serve`'s socket, the HTTP protocol and the app's runs share it)."""


class CountingSocket(socket.socket):
    """A listening socket that counts each connection it accepts in `first_frames` (the
    loop's accept is the first moment the process knows of a new client), and has it poll
    the accept queue for connections not accepted yet. asyncio's loop (`serve`'s) accepts
    through this object; uvloop accepts on the descriptor, so there only the poll counts."""

    def __init__(
        self,
        family: int = -1,
        kind: int = -1,
        proto: int = -1,
        *,
        first_frames: FirstFrames = FIRST_FRAMES,
    ) -> None:
        super().__init__(family, kind, proto)
        self._first_frames = first_frames
        first_frames.accepts_counted = True
        self._polled = self.fileno()
        first_frames.listen_on(self._polled)

    def accept(self) -> tuple[socket.socket, object]:
        conn, address = super().accept()
        self._first_frames.arrived()
        return conn, address

    def close(self) -> None:
        self._first_frames.stop_listening(self._polled)
        super().close()
