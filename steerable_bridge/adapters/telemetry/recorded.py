"""Spans recorded as plain values during a run and handed to the SDK's span processors.

`otel.py` knows, from the LoopEvents, when each span of a run starts and ends, so it does
not need the SDK's live `Span` (a lock, attribute validation and a processor call for every
attribute set, and a sampler call per span). Instead `RecordedTrace` opens each span as an
`OpenSpan`: the SDK's own `ReadableSpan`, built once when the span starts (name, ids,
parent, start time, resource, scope) and filled while it is open (attributes already in
their final primitive types, status), the way the SDK's `Span` fills the `ReadableSpan` it
extends. When the span ends it gets its end time and goes to the tracer provider's span
processors (`on_end`), the same kind of object at the same moment as the SDK's
`Span.end()` would hand them. The processors and exporters are the configured SDK ones
(`BatchSpanProcessor` + the OTLP exporter by default), so what leaves the process is what
the SDK would send.

What stays as the SDK does it: trace and span ids from the provider's id generator; head
sampling by the provider's sampler, asked once per run for the run span (with the caller's
context, so `parentbased_*` samplers follow the caller) — every span of the run shares that
decision, trace flags and trace state, as the standard samplers give children of a sampled
(or dropped) parent; attribute count and length limits from `OTEL_SPAN_ATTRIBUTE_*` /
`OTEL_ATTRIBUTE_*` when set. What differs: processors get no `on_start` call (there is no
live span to hand them; the SDK's batch and simple processors do nothing there), and a span
still open when the process dies is lost, as an SDK span never ended would be.
"""

from __future__ import annotations

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Decision, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
)
from opentelemetry.util.types import AttributeValue

__all__ = ["OpenSpan", "RecordedTrace", "SpanPipeline"]

Attributes = dict[str, AttributeValue]


class _HashedResource(Resource):
    """The provider's resource, hashed once: the OTLP encoder groups every span by its
    resource, and `Resource.__hash__` serialises all its attributes to JSON each time.
    A resource never changes, so the hash never does."""

    _hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = super().__hash__()
        return self._hash


class OpenSpan(ReadableSpan):
    """A span of a run, begun and not yet handed on: the SDK's `ReadableSpan`, whose
    attributes (`values`, a plain dict) and status may still change until `end`."""

    def __init__(
        self,
        pipeline: SpanPipeline,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        start: int,
        values: Attributes,
    ) -> None:
        super().__init__(
            name=name,
            context=context,
            parent=parent,
            resource=pipeline.resource,
            attributes=values,
            start_time=start,
            instrumentation_scope=pipeline.scope,
        )
        self.values = values

    def fail(self, message: str) -> None:
        """Mark the span failed (status ERROR with `message`)."""
        self._status = Status(StatusCode.ERROR, message)


class SpanPipeline:
    """What a tracer provider holds that spans need: sampler, ids, resource, processors."""

    def __init__(self, tracer: SdkTracer, scope: InstrumentationScope) -> None:
        self.sampler: Sampler = tracer.sampler
        self.ids: IdGenerator = tracer.id_generator
        self.processor: SpanProcessor = tracer.span_processor
        resource = tracer.resource
        self.resource: Resource = _HashedResource(resource.attributes, resource.schema_url)
        self.scope = scope
        limits = SpanLimits()  # the OTEL_SPAN_ATTRIBUTE_* / OTEL_ATTRIBUTE_* variables
        self.max_attributes: int | None = limits.max_span_attributes
        self.max_length: int | None = limits.max_span_attribute_length

    def start_trace(
        self, name: str, attributes: Attributes, parent: Context | None, now: int
    ) -> RecordedTrace:
        """The run span of a new trace (a child of the caller's span when `parent` holds
        one), sampled once by the provider's sampler for the whole run."""
        caller: SpanContext | None = get_current_span(parent).get_span_context()
        if caller is not None and not caller.is_valid:
            caller = None
        trace_id = caller.trace_id if caller is not None else self.ids.generate_trace_id()
        sampling = self.sampler.should_sample(
            parent, trace_id, name, SpanKind.INTERNAL, attributes, ()
        )
        decision = sampling.decision
        flags = TraceFlags.SAMPLED if decision is Decision.RECORD_AND_SAMPLE else TraceFlags.DEFAULT
        random_id = (
            caller.trace_flags.random_trace_id
            if caller is not None
            else self.ids.is_trace_id_random()
        )
        if random_id:
            flags |= TraceFlags.RANDOM_TRACE_ID
        trace = RecordedTrace(self, trace_id, TraceFlags(flags), sampling.trace_state)
        context = trace.new_context()
        root = None
        if decision is not Decision.DROP:
            root = OpenSpan(self, name, context, caller, now, {**sampling.attributes})
        trace.root_context, trace.root = context, root
        return trace


class RecordedTrace:
    """One run's trace: its ids, flags and trace state, and the spans recorded in it."""

    def __init__(
        self, pipeline: SpanPipeline, trace_id: int, flags: TraceFlags, state: object
    ) -> None:
        self.pipeline = pipeline
        self.trace_id = trace_id
        self.flags = flags
        self.state = state
        self.root: OpenSpan | None = None
        self.root_context: SpanContext | None = None

    def new_context(self) -> SpanContext:
        return SpanContext(
            self.trace_id,
            self.pipeline.ids.generate_span_id(),
            False,
            self.flags,
            self.state,  # type: ignore[arg-type]  # the sampler's TraceState (or None)
        )

    def child(self, name: str, parent: OpenSpan, attributes: Attributes, now: int) -> OpenSpan:
        return OpenSpan(self.pipeline, name, self.new_context(), parent.context, now, attributes)

    def end(self, span: OpenSpan, now: int) -> None:
        """Hand the finished span to the span processors, as the SDK's `Span.end` does."""
        pipeline = self.pipeline
        span._end_time = now
        if pipeline.max_length is not None or (
            pipeline.max_attributes is not None and len(span.values) > pipeline.max_attributes
        ):
            span._attributes = BoundedAttributes(
                pipeline.max_attributes, span.values, immutable=True,
                max_value_len=pipeline.max_length,
            )  # fmt: skip
        pipeline.processor.on_end(span)
