"""Whether and how a command traces its turns: OpenTelemetry, configured by `OTEL_*` only.

`tracing_requested()` reads the standard variables without importing anything: tracing is
on when `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set or
`OTEL_TRACES_EXPORTER` names an exporter other than `none`, and off whenever
`OTEL_SDK_DISABLED=true`. `tracing_observers()` returns the tracing observer then (built by
`adapters/telemetry/otel.py` from the same variables), or nothing — so a process without
those variables never imports OpenTelemetry. Tracing asked for without the `otel` extra
installed is a `ConfigError` naming the remedy. Spans still buffered are exported when the
process exits (the SDK flushes at exit).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from steerable_bridge.commands.errors import ConfigError

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.observe import Observer

__all__ = ["tracing_observers", "tracing_requested"]


def tracing_requested(env: Mapping[str, str] = os.environ) -> bool:
    """True when the `OTEL_*` variables ask for traces (see the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def tracing_observers() -> list[Observer]:
    """The tracing observer when tracing is requested, else none (nothing imported)."""
    if not tracing_requested():
        return []
    try:
        from steerable_bridge.adapters.telemetry.otel import OtelTracing
    except ImportError as error:
        raise ConfigError(
            f"the OTEL_* variables ask for traces but OpenTelemetry is not installed ({error});"
            " install it with: pip install 'steerable-bridge[otel]', or unset"
            " OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_TRACES_EXPORTER"
        ) from None
    try:
        return [OtelTracing.from_env()]
    except ValueError as error:
        raise ConfigError(str(error)) from None
