"""`serve` exporting traces as an operator sets it up: only `OTEL_*` variables, pointed at an
OTLP/HTTP receiver started here; the spans of a tool-using run arrive (decoded with
opentelemetry-proto), continuing the caller's `traceparent`, and the trace id rides in
RUN_STARTED. Without those variables nothing of OpenTelemetry is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.telemetry import tracing_observers, tracing_requested

from .serve_child import clean_env, frames, started

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every span it is sent, tells waiters."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Any]] = []
        self.paths: list[str] = []
        self.headers: list[str | None] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                request = ExportTraceServiceRequest.FromString(body)
                with receiver.changed:
                    receiver.paths.append(self.path)
                    receiver.headers.append(self.headers.get("x-team"))
                    for resource_spans in request.resource_spans:
                        resource = {
                            a.key: a.value.string_value for a in resource_spans.resource.attributes
                        }
                        for scope in resource_spans.scope_spans:
                            receiver.spans.extend((resource, span) for span in scope.spans)
                    receiver.changed.notify_all()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, names: set[str], timeout: float) -> set[str]:
        with self.changed:
            self.changed.wait_for(lambda: names <= self.names(), timeout=timeout)
            return self.names()

    def names(self) -> set[str]:
        return {span.name for _, span in self.spans}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(timeout=10)


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        value = a.value
        kind = value.WhichOneof("value")
        out[a.key] = (
            [v.string_value for v in value.array_value.values]
            if kind == "array_value"
            else getattr(value, kind)
        )
    return out


@pytest.mark.timeout(90)
def test_serve_exports_the_spans_of_a_tool_run_over_otlp_http(receiver: Receiver) -> None:
    """The batch delay is a minute, so the spans arriving proves the flush on shutdown too."""
    env = clean_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_EXPORTER_OTLP_HEADERS="x-team=bridge",
        OTEL_SERVICE_NAME="bridge-under-test",
        OTEL_TRACES_SAMPLER="parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG="1.0",
        OTEL_BSP_SCHEDULE_DELAY="60000",  # nothing leaves before the server stops
    )
    with started(["--log-level", "warning"], env) as (base, _):
        with httpx.Client(base_url=base, timeout=20) as client:
            body = {
                "threadId": "traced",
                "runId": "r1",
                "messages": [{"id": "u1", "role": "user", "content": "use a tool"}],
            }
            reply = client.post(
                "/agent",
                json=body,
                headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
            )
        first = frames(reply.text)[0]
        assert first["type"] == "RUN_STARTED"
        assert first["metadata"]["steerable"]["trace_id"] == CALLER_TRACE

        assert receiver.names() == set()
    # leaving `started` stops the server, which exports what it still buffers
    wanted = {"invoke_agent steerable-bridge", "chat default", "execute_tool calculate"}
    assert wanted <= receiver.wait_for(wanted, timeout=10)
    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.headers) == {"bridge"}  # OTEL_EXPORTER_OTLP_HEADERS
    spans = {span.name: (resource, span) for resource, span in receiver.spans}
    resource, run = spans["invoke_agent steerable-bridge"]
    assert resource["service.name"] == "bridge-under-test"
    assert run.trace_id.hex() == CALLER_TRACE and run.parent_span_id.hex() == CALLER_SPAN
    assert all(span.trace_id.hex() == CALLER_TRACE for _, span in receiver.spans)
    _, tool = spans["execute_tool calculate"]
    attributes = _attributes(tool)
    assert attributes["gen_ai.tool.name"] == "calculate"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    _, chat = spans["chat default"]
    assert _attributes(chat)["gen_ai.provider.name"] == "demo"


def test_without_otel_variables_nothing_of_opentelemetry_is_imported() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = (
        "import sys\n"
        "from steerable_bridge.commands.telemetry import tracing_observers\n"
        "import steerable_bridge.commands.serve, steerable_bridge.commands.acp\n"
        "import steerable_bridge.transports.agui.app, "
        "steerable_bridge.runtime.agent_sessions.session\n"
        "assert tracing_observers() == []\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_which_variables_turn_tracing_on() -> None:
    assert not tracing_requested({})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"})
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_requested({"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing_requested(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    )


def test_tracing_asked_for_without_the_extra_names_the_remedy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setitem(sys.modules, "steerable_bridge.adapters.telemetry.otel", None)
    with pytest.raises(ConfigError, match=r"steerable-bridge\[otel\]"):
        tracing_observers()
