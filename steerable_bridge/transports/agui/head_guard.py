"""Bounds on what a connection may cost `serve` before any auth: head size and time, body time,
connections at once.

uvicorn's HTTP protocols wait for a request head as long as bytes trickle in (its keep-alive
timer restarts on every byte), httptools buffers a header of any size, a body promised by
`Content-Length` is waited on for ever, and nothing stops idle connections from using up the
process's file descriptors, after which no one — `/health` included — is accepted. `guarded`
wraps uvicorn's protocol class (httptools or h11, `http_errors.py`) with a small guard in
front of its parser, built once per process from `ConnectionLimits`:

- **head size**: bytes up to the blank line ending a head are counted as they arrive, before
  the parser sees them; past `max_head_bytes` the answer is 431 and the connection closes
  (with httptools the request line and each header are counted again as parsed, which also
  covers a pipelined head). A client is usually still sending then, and closing a socket
  with unread input resets it, losing the answer; so while the server has room, the
  connection's input is read and dropped for `LINGER_S` after the answer (a lingering
  close) before it is closed;
- **head time**: a head must be complete `head_timeout_s` after the connection opened or the
  previous response ended, else 408 and close (a connection that sent nothing is just
  closed, as is an idle keep-alive one by uvicorn's shorter keep-alive timer);
- **body time**: a body must have arrived `body_timeout_s` after its head, else 408 (or a
  plain close once a response has started);
- **connections**: `ConnectionBudget` sets how many connections may be open, below the
  file-descriptor limit with room for the accept burst (uvicorn's `backlog`) and the rest of
  the process. Past it the connection that has waited longest for its head is shed (408),
  oldest first, so a flood of idle connections can never keep new ones out; when every open
  connection is busy with a request, the newcomer gets 503 with `Retry-After`.

What one connection can make the process hold before its head is accepted is thus about
`max_head_bytes` plus one socket read. Answers are JSON `{"error": {"code", "message"}}` with
`connection: close`. It never reads or logs header values.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

__all__ = ["ConnectionBudget", "ConnectionLimits", "connection_budget", "guarded"]

log = logging.getLogger(__name__)

LINGER_S = 2.0
"""How long a refused connection's input is still read (and dropped) so the answer arrives."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLimits:
    """What one connection may cost before and while its request is read."""

    max_head_bytes: int = 32 * 1024
    """Request line plus headers (431 beyond)."""
    head_timeout_s: float = 10.0
    """From connect (or the previous response) to the end of the head (408 beyond)."""
    body_timeout_s: float = 30.0
    """From the end of the head to the end of the body (408 beyond)."""
    keep_alive_s: int = 5
    """An idle kept-alive connection is closed after this many seconds."""
    max_connections: int | None = None
    """Connections open at once; None: as many as the file-descriptor limit leaves room for."""


@dataclass(frozen=True, slots=True)
class ConnectionBudget:
    """How many connections may be open, and how many one accept burst takes (`backlog`)."""

    max_connections: int
    backlog: int
    fd_limit: int


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 32


def connection_budget(limits: ConnectionLimits) -> ConnectionBudget:
    """The connection cap and accept backlog for this process's file-descriptor limit.

    asyncio accepts up to `backlog` connections per wake-up, and takes the next batch before
    the guard has seen the last (a connection reaches `connection_made` two loop turns after
    its accept), so about three batches are open beyond the cap before anything is shed; if
    that runs out of descriptors, asyncio stops accepting for a whole second. The process
    also needs some of its own (store, logs, tool processes). So the cap is `limit - open
    now - 3 x backlog - margin`, backlog a sixteenth of the limit (16 to 2,048) and margin
    an eighth (16 to 1,024). An explicit `max_connections` is kept when it fits, else lowered
    to what does (with a warning).
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soft if soft != resource.RLIM_INFINITY and soft > 0 else 65536
    backlog = min(2048, max(16, limit // 16))
    margin = min(1024, max(16, limit // 8))
    room = max(8, limit - _open_fds() - 3 * backlog - margin)
    wanted = limits.max_connections
    if wanted is None:
        cap = min(room, 10_000)
    else:
        cap = min(wanted, room)
        if cap < wanted:
            log.warning(
                "--max-connections %d does not fit the file-descriptor limit %d; using %d"
                " (raise the limit with ulimit -n)",
                wanted,
                limit,
                cap,
            )
    return ConnectionBudget(max_connections=cap, backlog=backlog, fd_limit=limit)


def _answer(status: int, reason: str, code: str, message: str, extra: bytes = b"") -> bytes:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n".encode()
        + extra
        + b"\r\n"
        + body
    )


def _head_end(window: bytes) -> int:
    """The index just past the blank line ending a head in `window`, or -1. h11 also takes
    bare-LF lines, so `\n\n` ends a head as well as `\r\n\r\n` (found as its `\n\r\n`)."""
    ends = [at + 2 for at in (window.find(b"\n\n"),) if at >= 0]
    ends += [at + 3 for at in (window.find(b"\n\r\n"),) if at >= 0]
    return min(ends) if ends else -1


class HeadTooLarge(Exception):
    """Raised inside httptools' callbacks to stop parsing an oversized head."""


@dataclass(frozen=True, slots=True)
class _Rules:
    """One process's guard: its limits, the answers it refuses with, and the connections
    waiting for a head, oldest first (a dict keeps insertion order)."""

    limits: ConnectionLimits
    budget: ConnectionBudget
    too_large: bytes
    slow_head: bytes
    slow_body: bytes
    shed: bytes
    busy: bytes
    waiting: dict[Any, None]


def guarded(base: type[Any], limits: ConnectionLimits, budget: ConnectionBudget) -> type[Any]:
    """`base` (a uvicorn HTTP protocol class) behind the guard of the module docstring."""
    max_head = limits.max_head_bytes
    rules = _Rules(
        limits=limits,
        budget=budget,
        too_large=_answer(
            431,
            "Request Header Fields Too Large",
            "head_too_large",
            f"the request line and headers are larger than {max_head} bytes; send smaller"
            " headers (the server's limit is serve --max-head)",
        ),
        slow_head=_answer(
            408,
            "Request Timeout",
            "request_timeout",
            f"the request head did not arrive within {limits.head_timeout_s:g}s; send the"
            " whole head at once (the server's limit is serve --head-timeout)",
        ),
        slow_body=_answer(
            408,
            "Request Timeout",
            "request_timeout",
            f"the request body did not arrive within {limits.body_timeout_s:g}s of its head;"
            " send the whole body (the server's limit is serve --body-timeout)",
        ),
        shed=_answer(
            408,
            "Request Timeout",
            "request_timeout",
            "the server is at its connection limit and this connection had not sent its"
            " request head; connect again and send the request at once",
        ),
        busy=_answer(
            503,
            "Service Unavailable",
            "server_busy",
            f"the server is serving its limit of {budget.max_connections} connections; try"
            " again shortly",
            b"retry-after: 1\r\n",
        ),
        waiting={},
    )
    return type(f"Guarded{base.__name__}", (_Guard, base), {"_rules": rules})


if TYPE_CHECKING:

    class _Uvicorn:
        """What the guard uses of a uvicorn HTTP protocol (h11 or httptools)."""

        connections: set[Any]
        transport: asyncio.Transport
        loop: asyncio.AbstractEventLoop
        cycle: Any

        def connection_made(self, transport: asyncio.Transport) -> None: ...
        def connection_lost(self, exc: Exception | None) -> None: ...
        def data_received(self, data: bytes) -> None: ...
        def on_response_complete(self) -> None: ...
        def on_message_complete(self) -> None: ...
        def on_message_begin(self) -> None: ...
        def on_url(self, url: bytes) -> None: ...
        def on_header(self, name: bytes, value: bytes) -> None: ...
        def send_400_response(self, msg: str) -> None: ...

else:
    _Uvicorn = object


class _Guard(_Uvicorn):
    """The guard, put in front of a uvicorn protocol class by `guarded` (which sets
    `_rules`): connection count, then per request the head phase (size and time) and the
    body phase (time), and the refusal that ends either."""

    _rules: _Rules
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _in_head = False
    _head_bytes = 0
    _tail = b""
    _parsed = 0
    _oversized = False
    _lingering = False
    _head_cycle: Any = None

    # -- connections -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._start_head()
        rules = self._rules
        if len(self.connections) <= rules.budget.max_connections:
            return
        victim = next((c for c in rules.waiting if c is not self), None)
        if victim is not None:
            victim._refuse(rules.shed)
        else:
            self._refuse(rules.busy)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        self._rules.waiting.pop(self, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering or self.transport.is_closing():
            return  # a refused connection's input is dropped
        if self._in_head and not self._head_fits(data):
            self._refuse(self._rules.too_large, linger=True)
            return
        super().data_received(data)
        if self._in_head and self.cycle is not self._head_cycle:  # a request began
            self._end_head()
            if not self.transport.is_closing():
                self._body_timer = self.loop.call_later(
                    self._rules.limits.body_timeout_s, self._body_late
                )

    def on_response_complete(self) -> None:
        super().on_response_complete()
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None:
            return
        if cycle.response_complete and not cycle.more_body:
            self._start_head()  # else a pipelined request runs, or its body is still due

    def on_message_complete(self) -> None:  # httptools: a body read after its response
        super().on_message_complete()
        cycle = self.cycle
        if cycle is not None and cycle.response_complete and not self.transport.is_closing():
            self._start_head()

    # httptools only: count what is parsed, which also bounds a pipelined head
    def on_message_begin(self) -> None:
        self._parsed = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if self._oversized:
            self._refuse(self._rules.too_large, linger=True)
        else:
            super().send_400_response(msg)

    # -- the head phase ----------------------------------------------------------------------

    def _head_fits(self, data: bytes) -> bool:
        """Count the head bytes in `data` (up to the blank line ending the head); False
        when the head has grown past `max_head_bytes`."""
        window = self._tail + data
        end = _head_end(window)
        size = self._head_bytes + (len(data) if end < 0 else end - len(self._tail))
        if size > self._rules.limits.max_head_bytes:
            return False
        self._head_bytes = size
        self._tail = window[-2:]
        return True

    def _count(self, size: int) -> None:
        self._parsed += size
        if self._parsed > self._rules.limits.max_head_bytes:
            self._oversized = True
            raise HeadTooLarge  # httptools stops; uvicorn answers via send_400_response

    def _start_head(self) -> None:
        self._stop_timers()
        self._in_head = True
        self._head_bytes = 0
        self._tail = b""
        self._head_cycle = self.cycle
        waiting = self._rules.waiting
        waiting.pop(self, None)
        waiting[self] = None  # the newest waits last
        self._head_timer = self.loop.call_later(self._rules.limits.head_timeout_s, self._head_late)

    def _end_head(self) -> None:
        self._in_head = False
        self._rules.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._in_head:
            return
        if self._head_bytes:
            self._refuse(self._rules.slow_head)
        else:  # nothing of a request came: an idle connection, closed without a word
            self._refuse(b"")

    # -- the body phase ----------------------------------------------------------------------

    def _body_late(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or self.transport.is_closing():
            return
        if cycle.response_started:
            self.transport.close()
        else:
            self._refuse(self._rules.slow_body)

    # -- refusal -----------------------------------------------------------------------------

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _refuse(self, answer: bytes, *, linger: bool = False) -> None:
        self._stop_timers()
        self._in_head = False
        self._rules.waiting.pop(self, None)
        transport = self.transport
        if transport.is_closing() or self._lingering:
            return
        if answer:
            transport.write(answer)
        roomy = len(self.connections) < self._rules.budget.max_connections // 2
        if linger and roomy and transport.can_write_eof():
            self._lingering = True  # input still read, and dropped, until closed
            transport.write_eof()
            self.loop.call_later(LINGER_S, transport.close)
        else:
            transport.close()
