"""What the AG-UI app tells a metrics backend: open streams, time to first frame, `/metrics`.

`HttpMetrics` is the narrow port the app needs (the CLI hands it one, e.g. the Prometheus
adapter's `ServerMetrics`; this transport never imports a metrics library). `metered(produce,
metrics, started)` wraps a run's producer: the stream counts as open while it produces, and
the first non-empty write reports the time since `started` (the request's arrival, from
`time.perf_counter()`). `metrics_response(metrics)` is the `GET /metrics` body.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.responses import Response

from steerable_bridge.transports.agui.stream import Write

__all__ = ["HttpMetrics", "Produce", "metered", "metrics_response"]

Produce = Callable[[Write], Awaitable[None]]


class HttpMetrics(Protocol):
    """Counters the app reports to, and the exposition it serves."""

    def stream_opened(self) -> None: ...

    def stream_closed(self) -> None: ...

    def first_event(self, seconds: float) -> None: ...

    def exposition(self) -> tuple[bytes, str]: ...


def metered(produce: Produce, metrics: HttpMetrics, started: float) -> Produce:
    """`produce`, counted as an open stream, reporting the delay to its first frame."""

    async def run(write: Write) -> None:
        first = True

        async def timed(data: bytes) -> None:
            nonlocal first
            if first and data:
                first = False
                metrics.first_event(time.perf_counter() - started)
            await write(data)

        metrics.stream_opened()
        try:
            await produce(timed)
        finally:
            metrics.stream_closed()

    return run


def metrics_response(metrics: HttpMetrics) -> Response:
    body, content_type = metrics.exposition()
    return Response(body, headers={"content-type": content_type})
