"""Telemetry adapters: Prometheus metrics (`metrics.py`) and OpenTelemetry traces (`otel.py`).

Both implement the runtime's `Observer` port (`runtime/ports/observe.py`): they watch each turn's
LoopEvents and never enter the loop. Each module imports its library itself, and only the
commands that use it import the module, so a process without tracing loads no OpenTelemetry.
"""
