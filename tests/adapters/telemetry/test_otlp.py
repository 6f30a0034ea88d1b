"""The quicker OTLP encoder: its bytes equal the SDK encoder's for every kind of span this
project makes (plain, error status, a caller's remote parent with trace state, content
attributes, limits), it leaves spans with events to the SDK's encoder, and the exporter
built on it delivers to an OTLP/HTTP receiver like the SDK's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from steerable_bridge.adapters.telemetry.otel import OtelTracing
from steerable_bridge.adapters.telemetry.otlp import OtlpSpanExporter, encode_spans
from steerable_bridge.runtime.ports.permissions import (
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.ports.tools import ToolFailure
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted, text_tool

pytestmark = [pytest.mark.timeout(30)]


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": args}


async def allow(request: PermissionRequest) -> PermissionAnswer:
    return PermissionAnswer(outcome="allow_once", option_id="allow_once")


def same(spans: tuple[ReadableSpan, ...]) -> None:
    ours = encode_spans(spans).SerializeToString(deterministic=True)
    assert ours == sdk_encode(spans).SerializeToString(deterministic=True)


@pytest.mark.anyio
@pytest.mark.parametrize("capture", [False, True])
async def test_the_spans_of_real_turns_encode_exactly_as_the_sdk_encodes_them(
    capture: bool,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "n": 3}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def broken(args: dict[str, Any], ctx: Any) -> Any:
        raise ToolFailure("disk_full", "no space left; free some and retry")

    model = scripted(
        {
            "tool_calls": [call("c1", "write", text="x"), call("c2", "save", text="y")],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 4},
        },
        {"text": "done", "usage": {"prompt_tokens": 20, "completion_tokens": 2}},
        {"error": {"code": "rate_limited", "message": "slow down"}},
    )
    tools = [text_tool("write", kind="edit"), text_tool("save", handler=broken)]
    agent = make_agent(model, tools=tools, approval="ask")
    agent.observers = (OtelTracing(provider, capture_content=capture),)
    session = await agent.new_session("/tmp")
    session.policy = StaticPolicy("ask", allow)
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    await session.prompt(TurnInput(content=(TextPart(text="go"),), traceparent=caller))
    await session.prompt(TurnInput(content=(TextPart(text="again"),)))
    spans = exporter.get_finished_spans()
    assert len(spans) >= 10
    assert any(s.status.status_code is StatusCode.ERROR for s in spans)
    assert any(s.parent is not None and s.parent.is_remote for s in spans)
    same(spans)
    for span in spans:
        same((span,))


def test_unusual_values_remote_parents_trace_state_and_several_scopes_encode_the_same() -> None:
    resource = Resource({"service.name": "x", "ratio": 0.5, "tags": ("a", "b")}, "https://s/1")
    scopes = [InstrumentationScope("a", "1", "https://s/2"), InstrumentationScope("b")]
    state = TraceState([("vendor", "v1"), ("other", "o")])
    parent = SpanContext(7, 9, True, TraceFlags(1), state)
    spans = tuple(
        ReadableSpan(
            name=f"s{i}",
            context=SpanContext(7, 100 + i, False, TraceFlags(1), state),
            parent=parent if i % 2 else None,
            resource=resource,
            attributes={"b": True, "i": -3, "f": 1.5, "s": "é", "list": (1, 2), "none": None},
            kind=list(SpanKind)[i % 5],
            status=Status(StatusCode.ERROR, "boom") if i == 1 else Status(StatusCode.OK),
            start_time=10,
            end_time=20,
            instrumentation_scope=scopes[i % 2],
        )
        for i in range(5)
    )
    same(spans)


def test_values_python_calls_equal_keep_their_own_encodings_when_cached() -> None:
    """1, 1.0 and True are equal (and hash alike) in Python; each encodes differently, so
    the cache must never hand one the other's encoding, in either order, nor a text's."""
    values: list[Any] = [1, True, 1.0, "1", ("a",), ["a"], (1, True), 0, False, 0.0, "", None]
    resource = Resource({"service.name": "x"})
    spans = tuple(
        ReadableSpan(
            name="s",
            context=SpanContext(7, 100 + i, False, TraceFlags(1)),
            resource=resource,
            attributes={"k": value, "n": i},
            status=Status(StatusCode.ERROR, f"boom {i}") if i % 3 == 0 else Status(),
            start_time=10,
            end_time=20,
        )
        for i, value in enumerate([*values, *reversed(values), *values])
    )
    same(spans)
    for span in spans:
        same((span,))


def test_spans_with_events_are_left_to_the_sdk_encoder() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("with-event") as span:
        span.add_event("something", {"k": "v"})
    received: list[bytes] = []
    sender = OtlpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces")
    sender._client.export = lambda data: received.append(data) or _Ok()  # type: ignore[method-assign]
    assert sender.export(exporter.get_finished_spans()) is SpanExportResult.SUCCESS
    request = ExportTraceServiceRequest.FromString(received[0])
    assert request.resource_spans[0].scope_spans[0].spans[0].events[0].name == "something"


class _Ok:
    success = True
    error = None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_exporter_sends_the_encoded_batch_and_reports_a_refusal(
    receiver: tuple[str, list[bytes]],
) -> None:
    url, bodies = receiver
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("one").end()
    spans = exporter.get_finished_spans()
    sender = OtlpSpanExporter(endpoint=url)
    assert sender.export(spans) is SpanExportResult.SUCCESS
    assert bodies == [encode_spans(spans).SerializePartialToString()]
    sender.shutdown()
    refused = OtlpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces", timeout=1)
    assert refused.export(spans) is SpanExportResult.FAILURE
