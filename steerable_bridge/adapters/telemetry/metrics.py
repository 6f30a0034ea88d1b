"""Prometheus metrics for `serve`: runs, latencies, tokens, streams and store appends.

`ServerMetrics()` owns a registry of its own (so two apps in one process never collide)
and is three things at once: an `Observer` of turns (runs started / finished by stop
reason / failed by code, active runs, run duration, model-call and tool latency, tokens,
all derived from the LoopEvents), the HTTP-side counters the AG-UI app reports to
(`stream_opened` / `stream_closed` for open SSE streams, `first_event` for the time from
request to first frame), and `timed_store(store)`, a store that times every `append`.
`exposition()` renders the Prometheus text format for `GET /metrics`.
Durations are taken with `time.perf_counter()` when each event is seen, which is right
after the log recorded it. Metric names start with `steerable_`. The runs finished are
reported for every stop reason from the start, at 0 (so a rate over them never misses its
first increment, and the series are made at start-up, not among a burst's objects, where
the first cancelled runs would make one that keeps an arena of memory in use).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from steerable_bridge.adapters.telemetry.inplace import (
    InPlaceCollector,
    InPlaceCounter,
    InPlaceGauge,
    InPlaceHistogram,
)
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent, StopReason
from steerable_bridge.runtime.ports.observe import RunWatch
from steerable_bridge.runtime.ports.storage import SessionPage, SessionRecord, SessionStore

__all__ = ["ServerMetrics", "TimedStore"]

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_SLOW = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServerMetrics:
    """The metrics of one server (see the module docstring)."""

    def __init__(self) -> None:
        self.runs_started = InPlaceCounter("steerable_runs_started", "Turns started (run_started).")
        self.runs_finished = InPlaceCounter(
            "steerable_runs_finished",
            "Turns ended with run_finished, by stop reason.",
            ["stop_reason"],
        )
        for reason in get_args(StopReason):  # each reported from the start, at 0
            self.runs_finished.labels(reason)
        self.runs_failed = InPlaceCounter(
            "steerable_runs_failed", "Turns ended with run_failed, by error code.", ["code"],
        )  # fmt: skip
        self.active_runs = InPlaceGauge("steerable_active_runs", "Turns running now.")
        self.run_duration = InPlaceHistogram(
            "steerable_run_duration_seconds",
            "From run_started to run_finished / run_failed.",
            buckets=_SLOW,
        )
        self.first_event_latency = InPlaceHistogram(
            "steerable_time_to_first_event_seconds",
            "From an AG-UI request's arrival to its first SSE frame.",
            buckets=_FAST,
        )
        self.model_latency = InPlaceHistogram(
            "steerable_model_call_duration_seconds",
            "From model_request to model_response, by provider and model.",
            ["provider", "model"],
            buckets=_SLOW,
        )
        self.tool_latency = InPlaceHistogram(
            "steerable_tool_duration_seconds",
            "From tool_started to tool_finished, by tool and status.",
            ["tool", "status"],
            buckets=_SLOW,
        )
        self.tokens = InPlaceCounter(
            "steerable_model_tokens",
            "Tokens reported by model responses, by type (input, output, cached, reasoning).",
            ["type"],
        )
        self.sse_clients = InPlaceGauge("steerable_sse_clients", "AG-UI event streams open now.")
        self.store_append = InPlaceHistogram(
            "steerable_store_append_seconds",
            "Time to append a batch of events to the session store.",
            buckets=_FAST,
        )
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(
            InPlaceCollector(
                (
                    self.runs_started, self.runs_finished, self.runs_failed, self.active_runs,
                    self.run_duration, self.first_event_latency, self.model_latency,
                    self.tool_latency, self.tokens, self.sse_clients, self.store_append,
                )
            )
        )  # fmt: skip

    # -- the Observer port ----------------------------------------------------------------

    def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch:
        return _RunMetrics(self)

    # -- what the HTTP app reports --------------------------------------------------------

    def stream_opened(self) -> None:
        self.sse_clients.inc()

    def stream_closed(self) -> None:
        self.sse_clients.dec()

    def first_event(self, seconds: float) -> None:
        self.first_event_latency.observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The body and content type of `GET /metrics`."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    # -- the store ------------------------------------------------------------------------

    def timed_store(self, store: SessionStore) -> TimedStore:
        return TimedStore(store, self.store_append)


_TIMED: frozenset[type[ev.EventBase]] = frozenset(
    {
        ev.RunStarted, ev.RunFinished, ev.RunFailed, ev.ModelRequestEvent,
        ev.ModelResponseEvent, ev.ToolCallEnd, ev.ToolStarted, ev.ToolFinished,
    }
)  # fmt: skip


class _RunMetrics:
    """One turn's watch: remembers when things started, to observe how long they took."""

    trace_id: str | None = None
    kinds = _TIMED

    def __init__(self, metrics: ServerMetrics) -> None:
        self.m = metrics
        self.started: float | None = None
        self.model_started: float | None = None
        self.route = ""
        self.tool_names: dict[str, str] = {}
        self.tools_started: dict[str, float] = {}

    def event(self, event: LoopEvent) -> None:
        if type(event) not in _TIMED:  # called directly, not through observed_run
            return
        now = time.perf_counter()
        m = self.m
        if isinstance(event, ev.RunStarted):
            m.runs_started.inc()
            m.active_runs.inc()
            self.started = now
        elif isinstance(event, ev.RunFinished):
            m.runs_finished.labels(event.stop_reason).inc()
            self._ended(now)
        elif isinstance(event, ev.RunFailed):
            m.runs_failed.labels(event.code).inc()
            self._ended(now)
        elif isinstance(event, ev.ModelRequestEvent):
            self.model_started, self.route = now, event.request.model
        elif isinstance(event, ev.ModelResponseEvent):
            if self.model_started is not None:
                provider, _, model = self.route.partition(":")
                m.model_latency.labels(provider, model or provider).observe(
                    now - self.model_started
                )
                self.model_started = None
            usage = event.usage
            for kind, count in (
                ("input", usage.prompt_tokens),
                ("output", usage.completion_tokens),
                ("cached", usage.cached_tokens),
                ("reasoning", usage.reasoning_tokens),
            ):
                if count > 0:
                    m.tokens.labels(kind).inc(count)
        elif isinstance(event, ev.ToolCallEnd):
            self.tool_names[event.call_id] = event.name
        elif isinstance(event, ev.ToolStarted):
            self.tools_started[event.call_id] = now
        elif isinstance(event, ev.ToolFinished):
            began = self.tools_started.pop(event.call_id, None)
            if began is not None:
                name = self.tool_names.get(event.call_id, "unknown")
                m.tool_latency.labels(name, event.status).observe(now - began)

    def _ended(self, now: float) -> None:
        if self.started is not None:
            self.m.run_duration.observe(now - self.started)
            self.m.active_runs.dec()
            self.started = None

    def close(self) -> None:
        if self.started is not None:  # the turn ended without its final event (a crash)
            self.m.active_runs.dec()
            self.started = None


class TimedStore:
    """A `SessionStore` that times `append` and passes everything else through unchanged
    (including the optional `claim` and `read_tail` a store may offer)."""

    def __init__(self, inner: SessionStore, histogram: InPlaceHistogram) -> None:
        self.inner = inner
        self._histogram = histogram

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def create(self, record: SessionRecord) -> None:
        await self.inner.create(record)

    async def append(self, session_id: str, events: Sequence[LoopEvent]) -> None:
        began = time.perf_counter()
        try:
            await self.inner.append(session_id, events)
        finally:
            self._histogram.observe(time.perf_counter() - began)

    async def read(self, session_id: str, *, after_seq: int = -1) -> list[LoopEvent]:
        return await self.inner.read(session_id, after_seq=after_seq)

    async def get(self, session_id: str) -> SessionRecord | None:
        return await self.inner.get(session_id)

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        return await self.inner.list(cwd=cwd, cursor=cursor, limit=limit, user=user)

    async def delete(self, session_id: str) -> bool:
        return await self.inner.delete(session_id)
