"""Run observers: the port tracing and metrics use to watch a turn without entering the loop.

An `Observer` is told when a session starts a turn, `start(session_id, traceparent=...)`,
and answers with a `RunWatch` for that turn. The watch sees every LoopEvent of the turn, in
order, right after the session log recorded it (`event(e)`), and `close()` once the turn is
over, whatever happened. Its `trace_id` (W3C, 32 hex digits, or None) is known before the
turn starts, so `run_started` can carry it; `traceparent` is the caller's W3C trace context,
when a client sent one, for the watch to continue. The loop already brackets everything
worth timing (run, step, model request / response, tool started / finished, permission
requested / resolved), so observers derive spans and figures from the events alone.

A watch runs inline in the loop's task: `event` must be quick, must not block and must not
raise (a failing watch is logged and the turn goes on). A watch that reads only a few kinds
says which with a `kinds` attribute (a frozenset of LoopEvent classes) and is told of
those only: most of a run's events are text deltas no watch needs, and they then cost one
dict lookup instead of a call per watch. `observed_run(...)` is what
`Session.prompt` uses: it starts every observer's watch, binds the log context
(`logcontext.py`), and wraps the caller's sink so each event reaches the watches first.
Implementations (OpenTelemetry, Prometheus) live under `adapters/telemetry`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.turns import logcontext
from steerable_bridge.runtime.turns.turn import EventSink

__all__ = ["ObservedRun", "Observer", "RunWatch", "observed_run"]

log = logging.getLogger(__name__)


class RunWatch(Protocol):
    """One observer's view of one turn (see the module docstring)."""

    @property
    def trace_id(self) -> str | None: ...

    def event(self, event: LoopEvent) -> None: ...

    def close(self) -> None: ...


class Observer(Protocol):
    """Something that watches turns: `start` is called once per turn, before it runs."""

    def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch: ...


@dataclass(frozen=True, slots=True)
class ObservedRun:
    """What `observed_run` hands the session: the sink to give the loop, and the trace id."""

    sink: EventSink
    trace_id: str | None


@contextmanager
def observed_run(
    observers: Sequence[Observer],
    session_id: str,
    sink: EventSink | None,
    *,
    traceparent: str | None = None,
) -> Iterator[ObservedRun]:
    """Watch one turn with every observer for the duration of the block."""
    watches: list[RunWatch] = []
    for observer in observers:
        try:
            watches.append(observer.start(session_id, traceparent=traceparent))
        except Exception:
            log.exception("session %s: an observer could not start watching the turn", session_id)
    trace_id = next((w.trace_id for w in watches if w.trace_id), None)
    routes: dict[type[LoopEvent], tuple[Callable[[LoopEvent], None], ...]] = {}

    def route(kind: type[LoopEvent]) -> tuple[Callable[[LoopEvent], None], ...]:
        wanted = tuple(
            w.event for w in watches if (k := getattr(w, "kinds", None)) is None or kind in k
        )
        routes[kind] = wanted
        return wanted

    with logcontext.bind(session_id, trace_id=trace_id) as context:

        async def observed(event: LoopEvent) -> None:
            kind = type(event)
            if kind is ev.RunStarted:
                context.run_id = event.run_id
            handlers = routes.get(kind)
            if handlers is None:
                handlers = route(kind)
            for handler in handlers:
                try:
                    handler(event)
                except Exception:
                    log.exception("an observer failed on %s seq %s", event.kind, event.seq)
            if sink is not None:
                await sink(event)

        try:
            yield ObservedRun(sink=observed, trace_id=trace_id)
        finally:
            for watch in watches:
                try:
                    watch.close()
                except Exception:
                    log.exception("session %s: an observer failed to close", session_id)
