"""`serve`'s metrics update in place and scrape exactly as prometheus_client's own would.

What an operator sees: `/metrics` text identical (apart from `_created` timestamps) to the
same counters, gauges and histograms kept by prometheus_client itself; and what the memory
after a burst depends on: an update leaves no new object behind (prometheus_client's own
values are a fresh float each time, which pins whatever arena it lands in).
"""

from __future__ import annotations

import re
import tracemalloc

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from steerable_bridge.adapters.telemetry.inplace import (
    InPlaceCollector,
    InPlaceCounter,
    InPlaceGauge,
    InPlaceHistogram,
)
from steerable_bridge.adapters.telemetry.metrics import ServerMetrics

_METRIC_CODE = ("prometheus_client", "steerable_bridge/adapters/telemetry")
BUCKETS = (0.001, 0.01, 0.1, 1.0, 10.0)
OBSERVED = (0.0005, 0.001, 0.003, 0.1, 7.5, 500.0, 0.25, 10.0)


def _untimed(text: bytes) -> str:
    return re.sub(r"_created(\{[^}]*\})? \S+", r"_created\1 T", text.decode())


def _drive(counter, labelled, gauge, histogram, by_route) -> None:  # type: ignore[no-untyped-def]
    counter.inc()
    counter.inc(2.5)
    labelled.labels("end_turn").inc()
    labelled.labels("cancelled").inc(3)
    labelled.labels("end_turn").inc()
    gauge.inc()
    gauge.inc()
    gauge.dec()
    for value in OBSERVED:
        histogram.observe(value)
        by_route.labels("openai", "gpt").observe(value * 2)
    by_route.labels("scripted", "x").observe(0.02)


def test_the_scrape_matches_prometheus_clients_own_metrics() -> None:
    theirs = CollectorRegistry(auto_describe=True)
    reference = (
        Counter("a_runs", "Runs.", registry=theirs),
        Counter("a_ends", "Ends, by reason.", ["reason"], registry=theirs),
        Gauge("a_open", "Open now.", registry=theirs),
        Histogram("a_seconds", "Durations.", buckets=BUCKETS, registry=theirs),
        Histogram("a_route", "By route.", ["provider", "model"], buckets=BUCKETS, registry=theirs),
        Histogram("a_idle", "Never observed.", ["tool"], buckets=BUCKETS, registry=theirs),
    )
    _drive(*reference[:5])
    metrics = (
        InPlaceCounter("a_runs", "Runs."),
        InPlaceCounter("a_ends", "Ends, by reason.", ["reason"]),
        InPlaceGauge("a_open", "Open now."),
        InPlaceHistogram("a_seconds", "Durations.", buckets=BUCKETS),
        InPlaceHistogram("a_route", "By route.", ["provider", "model"], buckets=BUCKETS),
        InPlaceHistogram("a_idle", "Never observed.", ["tool"], buckets=BUCKETS),
    )
    _drive(*metrics[:5])
    ours = CollectorRegistry(auto_describe=True)
    ours.register(InPlaceCollector(metrics))
    expected = _untimed(generate_latest(theirs))
    assert _untimed(generate_latest(ours)) == expected
    assert 'a_seconds_bucket{le="+Inf"} 8.0' in expected  # the comparison compared something


def test_bad_updates_are_refused_with_a_remedy() -> None:
    counter = InPlaceCounter("b_total_things", "Things.", ["kind"])
    with pytest.raises(ValueError, match="pass an amount >= 0"):
        counter.labels("x").inc(-1)
    with pytest.raises(ValueError, match="pass one value each"):
        counter.labels("x", "y")


def test_updates_leave_no_new_object_behind() -> None:
    metrics = ServerMetrics()
    rounds = 200

    def burst() -> None:
        for _ in range(rounds):
            metrics.runs_started.inc()
            metrics.active_runs.inc()
            metrics.runs_finished.labels("end_turn").inc()
            metrics.tokens.labels("output").inc(17)
            metrics.model_latency.labels("scripted", "x").observe(0.3)
            metrics.first_event(0.002)
            metrics.stream_opened()
            metrics.stream_closed()
            metrics.active_runs.dec()

    burst()  # the series exist now, as they do after a server's warm-up run
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        burst()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = [
        stat
        for stat in after.compare_to(before, "filename")
        if stat.size_diff > 0 and any(part in stat.traceback[0].filename for part in _METRIC_CODE)
    ]
    assert grown == []
    body = metrics.exposition()[0].decode()
    assert f"steerable_runs_started_total {2.0 * rounds}" in body
    assert "steerable_active_runs 0.0" in body


def test_every_stop_reason_is_reported_from_the_start_and_a_first_cancel_makes_nothing() -> None:
    metrics = ServerMetrics()
    text = _untimed(metrics.exposition()[0])
    for reason in ("end_turn", "max_tokens", "cancelled", "interrupted", "rejected"):
        assert f'steerable_runs_finished_total{{stop_reason="{reason}"}} 0.0' in text
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        metrics.runs_finished.labels("cancelled").inc()  # a burst's first cancelled run
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    made = [s for s in after.compare_to(before, "filename") if "inplace" in str(s.traceback)]
    assert [s for s in made if s.size_diff > 0] == []
    assert 'steerable_runs_finished_total{stop_reason="cancelled"} 1.0' in _untimed(
        metrics.exposition()[0]
    )
