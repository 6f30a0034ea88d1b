"""Counters, gauges and histograms whose values change in place, exported at scrape time.

prometheus_client's own metric objects keep each value as a Python float and replace it on
every update, so every run leaves a fresh small object behind, wherever in CPython's
small-object arenas the allocator found room at that moment; after a burst of runs the last
of those land among the burst's objects and keep whole 1 MiB arenas from going back to the
system. Here each series' values live in an `array('d')` made when the series is first
used (for a series without labels, when the metric is made), so an update writes eight
bytes into memory that already exists and allocates nothing that outlives the call.
`InPlaceCollector` is a prometheus_client custom collector (`registry.register`) that turns
them into the library's metric families when `/metrics` is scraped, so the text format
(`_total`, `_created`, `_bucket{le}`, `_count`, `_sum`) is the library's own. Each metric
has a lock, so updates from worker threads are safe too.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["InPlaceCollector", "InPlaceCounter", "InPlaceGauge", "InPlaceHistogram"]


class _Series:
    """One labelled series: its values (`array('d')`) and when it was first used."""

    __slots__ = ("created", "metric", "values")

    def __init__(self, metric: _Metric, size: int) -> None:
        self.metric = metric
        self.values = array("d", bytes(8 * size))
        self.created = time.time()


class _Metric:
    """What the three kinds share: a name, help, label names and the series by labels."""

    size = 1
    series_type: type[_Series] = _Series

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.lock = threading.Lock()
        self.series: dict[tuple[str, ...], _Series] = {}
        self.values = array("d")  # an unlabelled metric's own series' values
        if not self.labelnames:
            only = self.series[()] = self.series_type(self, self.size)
            self.values = only.values

    def _labelled(self, labels: tuple[str, ...]) -> _Series:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}; pass one value each")
        found = self.series.get(labels)
        if found is None:
            with self.lock:
                found = self.series.setdefault(labels, self.series_type(self, self.size))
        return found

    def family(self) -> Metric:
        """The metric family prometheus_client renders, built from a snapshot."""
        raise NotImplementedError

    def _snapshot(self) -> list[tuple[tuple[str, ...], _Series, list[float]]]:
        with self.lock:
            return [(k, s, s.values.tolist()) for k, s in self.series.items()]


class _CounterSeries(_Series):
    __slots__ = ()

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up; pass an amount >= 0")
        with self.metric.lock:
            self.values[0] += amount


class InPlaceCounter(_Metric):
    """A counter (`_total`, `_created`); `.inc()` or `.labels(...).inc()`."""

    series_type = _CounterSeries

    def labels(self, *values: str) -> _CounterSeries:
        return self._labelled(values)  # type: ignore[return-value]

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up; pass an amount >= 0")
        if self.labelnames:
            self.labels()  # refused: labels missing
        with self.lock:
            self.values[0] += amount

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, series, values in self._snapshot():
            family.add_metric(labels, values[0], created=series.created)
        return family


class _GaugeSeries(_Series):
    __slots__ = ()

    def inc(self, amount: float = 1.0) -> None:
        with self.metric.lock:
            self.values[0] += amount

    def dec(self, amount: float = 1.0) -> None:
        with self.metric.lock:
            self.values[0] -= amount


class InPlaceGauge(_Metric):
    """A gauge; `.inc()` / `.dec()` (labelled: `.labels(...).inc()`)."""

    series_type = _GaugeSeries

    def labels(self, *values: str) -> _GaugeSeries:
        return self._labelled(values)  # type: ignore[return-value]

    def inc(self, amount: float = 1.0) -> None:
        if self.labelnames:
            self.labels()  # refused: labels missing
        with self.lock:
            self.values[0] += amount

    def dec(self, amount: float = 1.0) -> None:
        if self.labelnames:
            self.labels()  # refused: labels missing
        with self.lock:
            self.values[0] -= amount

    def family(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, _, values in self._snapshot():
            family.add_metric(labels, values[0])
        return family


class _HistogramSeries(_Series):
    """Values: one count per bucket (not cumulative; the last is +Inf), then the sum."""

    __slots__ = ()

    def observe(self, amount: float) -> None:
        metric: InPlaceHistogram = self.metric  # type: ignore[assignment]
        index = bisect_left(metric.bounds, amount)  # the first bucket with amount <= bound
        with metric.lock:
            self.values[index] += 1.0
            self.values[-1] += amount


class InPlaceHistogram(_Metric):
    """A histogram with fixed bucket bounds (`+Inf` added); `.observe()` or
    `.labels(...).observe()`."""

    series_type = _HistogramSeries

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
    ) -> None:
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = tuple(bounds)
        self.size = len(self.bounds) + 1
        self._le = tuple(floatToGoString(b) for b in self.bounds)  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames)

    def labels(self, *values: str) -> _HistogramSeries:
        return self._labelled(values)  # type: ignore[return-value]

    def observe(self, amount: float) -> None:
        if self.labelnames:
            self.labels()  # refused: labels missing
        index = bisect_left(self.bounds, amount)
        with self.lock:
            self.values[index] += 1.0
            self.values[-1] += amount

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, series, values in self._snapshot():
            running, buckets = 0.0, []
            for le, count in zip(self._le, values, strict=False):
                running += count
                buckets.append((le, running))
            family.add_metric(labels, buckets, values[-1])
            named = dict(zip(self.labelnames, labels, strict=True))
            family.samples.append(Sample(self.name + "_created", named, series.created))
        return family


class InPlaceCollector(Collector):
    """Exports the given metrics, in their order, when the registry is scraped."""

    def __init__(self, metrics: Sequence[_Metric]) -> None:
        self.metrics = tuple(metrics)

    def collect(self) -> Iterator[Metric]:
        for metric in self.metrics:
            yield metric.family()
