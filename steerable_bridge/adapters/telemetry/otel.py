"""OpenTelemetry traces of turns, with the GenAI semantic conventions: an `Observer`.

`OtelTracing(provider)` watches each turn (`runtime/ports/observe.py`) and turns its LoopEvents
into spans, all in one trace per run:

    invoke_agent steerable-bridge          run_started → run_finished / run_failed
      step N                               step_started → step_finished
        chat MODEL                         model_request → model_response
        permission TOOL                    permission_requested → permission_resolved
        execute_tool TOOL                  tool_started → tool_finished

Spans get explicit start and end times (the moment each event is seen, right after the log
recorded it), so the loop carries no tracing code. Each span is the SDK's own
`ReadableSpan`, filled while open and handed to the provider's span processors when it ends
(`recorded.py`): the SDK's live span API costs tens of microseconds a span, this a few.
Only the kinds that open or close a span reach a trace (`kinds`; text deltas only when
content is captured), each through one table lookup. Attributes follow the GenAI conventions:
`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
`gen_ai.response.model`, `gen_ai.usage.input_tokens` / `output_tokens` /
`cache_read.input_tokens`, `gen_ai.response.finish_reasons`, `gen_ai.tool.name`,
`gen_ai.tool.call.id`, `gen_ai.conversation.id`; errors (run_failed, a failed tool, a model
call cut short) set the span's status to ERROR with `error.type` = the stable code. Message
content (`gen_ai.input.messages`, `gen_ai.output.messages`, tool arguments and results) is
recorded only with `capture_content=True`. A caller's W3C `traceparent` makes the run span
a child of the caller's span; the run's trace id is known before the turn starts.

`OtelTracing.from_env()` builds the SDK pipeline from the standard `OTEL_*` variables only
(exporter, endpoint, headers, service name, resource, sampler incl. `traceidratio`, batch
settings). Only the commands import this module, and only when those variables ask for
traces (`commands/telemetry.py`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from steerable_bridge import __version__
from steerable_bridge.adapters.telemetry.recorded import OpenSpan, RecordedTrace, SpanPipeline
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.ports.observe import RunWatch
from steerable_bridge.runtime.values import Message, TextPart, ToolContent

__all__ = ["CAPTURE_ENV", "OtelTracing", "capture_requested"]

log = logging.getLogger(__name__)

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
AGENT_NAME = "steerable-bridge"
_PROPAGATOR = TraceContextTextMapPropagator()
SCOPE = InstrumentationScope("steerable_bridge", __version__)


def capture_requested(env: Mapping[str, str] = os.environ) -> bool:
    return env.get(CAPTURE_ENV, "").strip().lower() == "true"


class OtelTracing:
    """The tracing observer (see the module docstring)."""

    def __init__(self, provider: TracerProvider, *, capture_content: bool = False) -> None:
        self.provider = provider
        tracer = provider.get_tracer(SCOPE.name, SCOPE.version)
        if not isinstance(tracer, SdkTracer):  # e.g. OTEL_SDK_DISABLED: nothing to record
            raise ValueError("tracing needs the OpenTelemetry SDK's TracerProvider")
        self.pipeline = SpanPipeline(tracer, SCOPE)
        self.capture_content = capture_content

    @classmethod
    def from_env(cls) -> OtelTracing:
        """The SDK pipeline the `OTEL_*` variables describe (OTLP over HTTP by default)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": AGENT_NAME}))
        provider = TracerProvider(resource=resource)
        exporters = [
            name.strip().lower()
            for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
            if name.strip()
        ]
        for name in exporters:
            exporter: SpanExporter
            if name == "console":
                exporter = ConsoleSpanExporter(out=sys.stderr)  # stdout may be a protocol
            elif name == "otlp":
                from steerable_bridge.adapters.telemetry.otlp import OtlpSpanExporter

                exporter = OtlpSpanExporter()
            else:
                raise ValueError(
                    f"OTEL_TRACES_EXPORTER={name!r} is not supported here; use otlp"
                    " (OTLP over HTTP), console or none"
                )
            provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, capture_content=capture_requested())

    async def aclose(self) -> None:
        """Export what is buffered and stop; `Agent.aclose` calls it when the server stops
        (a process ended by a signal never runs the SDK's own exit hook)."""
        shutdown = getattr(self.provider, "shutdown", None)
        if shutdown is not None:
            await anyio.to_thread.run_sync(shutdown)

    def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch:
        parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
        trace = self.pipeline.start_trace(
            f"invoke_agent {AGENT_NAME}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.conversation.id": session_id,
            },
            parent,
            time.time_ns(),
        )
        return _RunTrace(self, trace)


def _route(route: str) -> tuple[str, str]:
    """`openai:gpt-4o` → (`openai`, `gpt-4o`)."""
    provider, _, model = route.partition(":")
    return provider, model or provider


def _text(content: tuple[ToolContent, ...]) -> str:
    return "".join(part.text for part in content if isinstance(part, TextPart))


def _message(message: Message) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": _text(message.content)})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.call_id, "name": call.name,
             "arguments": call.arguments_json}
        )  # fmt: skip
    if message.tool_call_id is not None:
        parts = [{"type": "tool_call_response", "id": message.tool_call_id,
                  "response": _text(message.content)}]  # fmt: skip
    return {"role": message.role, "parts": parts}


def _input_messages(request: ModelRequest) -> str:
    return json.dumps([_message(m) for m in request.messages], ensure_ascii=False)


class _RunTrace:
    """One run's spans; opened and closed as the events arrive (see `recorded.py`). Each
    kind a trace reads has its handler in `_HANDLERS`; `observed_run` tells this watch of
    those kinds only (`kinds`), so the many deltas of a run never reach it."""

    def __init__(self, tracing: OtelTracing, trace: RecordedTrace) -> None:
        self.trace = trace
        self.capture = tracing.capture_content
        self.run = trace.root
        context = trace.root_context
        self._trace_id = (
            format(context.trace_id, "032x") if context is not None and context.is_valid else None
        )
        self.step: OpenSpan | None = None
        self.model: OpenSpan | None = None
        self.tools: dict[str, OpenSpan] = {}
        self.waits: dict[str, OpenSpan] = {}
        self.names: dict[str, str] = {}
        self.arguments: dict[str, str] = {}
        self.output: list[str] = []
        self.ended = self.run is None  # not sampled: nothing to record
        self.kinds = _CAPTURED if self.capture else _BRACKETS
        """What `observed_run` tells this watch of: no delta unless content is captured."""

    @property
    def trace_id(self) -> str | None:
        return self._trace_id

    def _child(self, name: str, attributes: dict[str, Any], now: int) -> OpenSpan:
        parent = self.step if self.step is not None else self.run
        assert parent is not None
        return self.trace.child(name, parent, attributes, now)

    def event(self, event: LoopEvent) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            if not self.ended:
                handler(self, event, time.time_ns())
        elif type(event) is ev.TextDelta and self.capture and self.model is not None:
            self.output.append(event.delta)

    def _run_started(self, event: ev.RunStarted, now: int) -> None:
        assert self.run is not None
        provider, model = _route(event.model)
        values = self.run.values
        values["gen_ai.provider.name"] = provider
        values["gen_ai.request.model"] = model
        values["steerable.run_id"] = event.run_id

    def _step_started(self, event: ev.StepStarted, now: int) -> None:
        self.step = self._child(f"step {event.step}", {"steerable.step": event.step}, now)

    def _model_request(self, event: ev.ModelRequestEvent, now: int) -> None:
        provider, model = _route(event.request.model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        }
        if self.capture:
            attributes["gen_ai.system_instructions"] = json.dumps(
                [{"type": "text", "content": event.request.system}], ensure_ascii=False
            )
            attributes["gen_ai.input.messages"] = _input_messages(event.request)
            self.output = []
        self.model = self._child(f"chat {model}", attributes, now)

    def _tool_call_end(self, event: ev.ToolCallEnd, now: int) -> None:
        self.names[event.call_id] = event.name
        if self.capture:
            self.arguments[event.call_id] = event.arguments_json

    def _model_response(self, event: ev.ModelResponseEvent, now: int) -> None:
        span = self.model
        if span is None:
            return
        usage = event.usage
        attributes = span.values
        attributes["gen_ai.response.finish_reasons"] = (event.finish_reason,)
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        if usage.cached_tokens:  # only the counts a response has
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
        if usage.reasoning_tokens:
            attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
        if event.model:
            attributes["gen_ai.response.model"] = event.model
        if self.capture:
            parts: list[dict[str, Any]] = []
            if self.output:
                parts.append({"type": "text", "content": "".join(self.output)})
            parts.extend(
                {"type": "tool_call", "id": call_id, "name": self.names.get(call_id, ""),
                 "arguments": arguments}
                for call_id, arguments in self.arguments.items()
            )  # fmt: skip
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": event.finish_reason}],
                ensure_ascii=False,
            )
            self.output = []
        self.trace.end(span, now)
        self.model = None

    def _wait_span(self, tool_name: str, call_id: str, now: int) -> OpenSpan:
        return self._child(
            f"permission {tool_name}",
            {"gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": call_id},
            now,
        )

    def _permission_requested(self, event: ev.PermissionRequested, now: int) -> None:
        self.waits[event.call_id] = self._wait_span(event.tool_name, event.call_id, now)

    def _permission_resolved(self, event: ev.PermissionResolved, now: int) -> None:
        wait = self.waits.pop(event.call_id, None) or self._wait_span(
            event.tool_name, event.call_id, now
        )
        wait.values["steerable.permission.outcome"] = event.outcome
        self.trace.end(wait, now)

    def _tool_span(self, call_id: str, now: int) -> OpenSpan:
        name = self.names.get(call_id, "tool")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        }
        if self.capture and call_id in self.arguments:
            attributes["gen_ai.tool.call.arguments"] = self.arguments[call_id]
        return self._child(f"execute_tool {name}", attributes, now)

    def _tool_started(self, event: ev.ToolStarted, now: int) -> None:
        self.tools[event.call_id] = self._tool_span(event.call_id, now)

    def _tool_finished(self, event: ev.ToolFinished, now: int) -> None:
        span = self.tools.pop(event.call_id, None)
        if span is None:  # refused before it ran (unknown tool, bad arguments, cancelled)
            span = self._tool_span(event.call_id, now)
        span.values["steerable.tool.status"] = event.status
        if event.error is not None:
            span.values["error.type"] = event.error.code
            span.fail(event.error.message)
        if self.capture:
            span.values["gen_ai.tool.call.result"] = _text(event.content)
        self.arguments.pop(event.call_id, None)
        self.trace.end(span, now)

    def _step_finished(self, event: ev.StepFinished, now: int) -> None:
        if self.step is not None:
            self.step.values["steerable.finish_reason"] = event.finish_reason
            self.trace.end(self.step, now)
            self.step = None

    def _run_finished(self, event: ev.RunFinished, now: int) -> None:
        assert self.run is not None
        values = self.run.values
        values["steerable.stop_reason"] = event.stop_reason
        values["gen_ai.usage.input_tokens"] = event.usage.prompt_tokens
        values["gen_ai.usage.output_tokens"] = event.usage.completion_tokens
        self._end(now)

    def _run_failed(self, event: ev.RunFailed, now: int) -> None:
        assert self.run is not None
        if self.model is not None:
            self.model.values["error.type"] = event.code
            self.model.fail(event.message)
        self.run.values["error.type"] = event.code
        self.run.fail(event.message)
        self._end(now)

    def _end(self, now: int) -> None:
        """End every span still open (children first), then the run."""
        for span in [*self.waits.values(), *self.tools.values(), self.model, self.step, self.run]:
            if span is not None:
                self.trace.end(span, now)
        self.waits.clear()
        self.tools.clear()
        self.model = self.step = None
        self.ended = True

    def close(self) -> None:
        if self.ended:
            return
        assert self.run is not None
        self.run.fail("the turn ended without a final event")
        self._end(time.time_ns())


_HANDLERS: dict[type[ev.EventBase], Callable[[_RunTrace, Any, int], None]] = {
    ev.RunStarted: _RunTrace._run_started,
    ev.StepStarted: _RunTrace._step_started,
    ev.ModelRequestEvent: _RunTrace._model_request,
    ev.ToolCallEnd: _RunTrace._tool_call_end,
    ev.ModelResponseEvent: _RunTrace._model_response,
    ev.PermissionRequested: _RunTrace._permission_requested,
    ev.PermissionResolved: _RunTrace._permission_resolved,
    ev.ToolStarted: _RunTrace._tool_started,
    ev.ToolFinished: _RunTrace._tool_finished,
    ev.StepFinished: _RunTrace._step_finished,
    ev.RunFinished: _RunTrace._run_finished,
    ev.RunFailed: _RunTrace._run_failed,
}
"""What each kind a trace reads does to it (every other kind never reaches the watch)."""
_BRACKETS: frozenset[type[ev.EventBase]] = frozenset(_HANDLERS)
"""The kinds a trace reads: `observed_run` passes it no other (most events are deltas)."""
_CAPTURED = _BRACKETS | {ev.TextDelta}
