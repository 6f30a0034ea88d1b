"""Who a log line is about: the session, run and trace of the turn that wrote it.

`bind(session_id, trace_id=...)` marks the current task (and the tasks it spawns from then
on) as working for one session's turn, and returns the `LogContext` it bound; the run id is
filled in when the turn's `run_started` is seen (`observe.py`). `ContextFilter` is a
`logging.Filter` for handlers: it copies the three ids onto every record as `session_id`,
`run_id` and `trace_id` (None outside a turn), so any formatter can print them. This module
only reads and sets a context variable; it never writes a log line itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ContextFilter", "LogContext", "bind", "current"]


@dataclass(slots=True)
class LogContext:
    """The ids of the turn a task works for; `run_id` is set once the run has one."""

    session_id: str
    run_id: str | None = None
    trace_id: str | None = None


_current: ContextVar[LogContext | None] = ContextVar("steerable_log_context", default=None)


def current() -> LogContext | None:
    """The context bound in this task, if any."""
    return _current.get()


@contextmanager
def bind(session_id: str, *, trace_id: str | None = None) -> Iterator[LogContext]:
    """Bind a fresh context for the duration of the block (restoring the previous one)."""
    context = LogContext(session_id=session_id, trace_id=trace_id)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


class ContextFilter(logging.Filter):
    """Adds `session_id`, `run_id` and `trace_id` to every record passing the handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        record.session_id = context.session_id if context else None
        record.run_id = context.run_id if context else None
        record.trace_id = context.trace_id if context else None
        return True
