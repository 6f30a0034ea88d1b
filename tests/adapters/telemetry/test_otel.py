"""OpenTelemetry traces of real turns, read back from the SDK's in-memory exporter: the span
tree, the GenAI attributes, error status, message content only on request, sampling, and a
caller's traceparent continued."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import StatusCode

from steerable_bridge.adapters.telemetry.otel import OtelTracing
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.permissions import (
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.ports.tools import ToolFailure
from tests.runtime.harness import make_agent, of, prompt, scripted, text_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": args}


def tracing(**options: Any) -> tuple[OtelTracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=options.pop("sampler", None))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracing(provider, **options), exporter


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


async def allow(request: PermissionRequest) -> PermissionAnswer:
    return PermissionAnswer(outcome="allow_once", option_id="allow_once")


async def test_a_tool_run_is_one_trace_with_step_model_tool_and_permission_spans() -> None:
    observer, exporter = tracing()
    model = scripted(
        {
            "tool_calls": [call("c1", "write", text="x")],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 4},
        },
        {"text": "done", "usage": {"prompt_tokens": 20, "completion_tokens": 2}},
    )
    agent = make_agent(model, tools=[text_tool("write", kind="edit")], approval="ask")
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    session.policy = StaticPolicy("ask", allow)
    outcome, seen = await prompt(session, "write it")
    assert outcome.stop_reason == "end_turn"

    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert set(named) == {
        "invoke_agent steerable-bridge",
        "step 1",
        "step 2",
        "chat m",
        "permission write",
        "execute_tool write",
    }
    assert len(spans) == 7  # two model calls share a name
    run = named["invoke_agent steerable-bridge"]
    assert run.parent is None
    assert {span.context.trace_id for span in spans} == {run.context.trace_id}
    started = of(seen, ev.RunStarted)[0]
    assert started.trace_id == format(run.context.trace_id, "032x") == outcome.trace_id
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == session.id
    assert run.attributes["steerable.stop_reason"] == "end_turn"
    assert run.attributes["gen_ai.usage.input_tokens"] == 32

    step1, step2 = named["step 1"], named["step 2"]
    assert step1.parent is not None and step1.parent.span_id == run.context.span_id
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time or 0)
    first = chats[0]
    assert first.parent is not None and first.parent.span_id == step1.context.span_id
    assert chats[1].parent is not None and chats[1].parent.span_id == step2.context.span_id
    assert first.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "test"
    assert first.attributes["gen_ai.request.model"] == "m"
    assert first.attributes["gen_ai.usage.input_tokens"] == 12
    assert first.attributes["gen_ai.usage.output_tokens"] == 3
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 4
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert "gen_ai.input.messages" not in first.attributes  # content is opt-in

    tool, wait = named["execute_tool write"], named["permission write"]
    for span in (tool, wait):
        assert span.parent is not None and span.parent.span_id == step1.context.span_id
        assert span.attributes is not None and span.attributes["gen_ai.tool.call.id"] == "c1"
        assert span.attributes["gen_ai.tool.name"] == "write"
    assert wait.attributes is not None
    assert wait.attributes["steerable.permission.outcome"] == "allow_once"
    assert tool.attributes is not None and tool.attributes["gen_ai.operation.name"] == (
        "execute_tool"
    )
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    # the wait ends before the tool starts; every child lies inside the run
    assert wait.end_time is not None and tool.start_time is not None
    assert wait.end_time <= tool.start_time
    for span in spans:
        assert run.start_time is not None and run.end_time is not None
        assert span.start_time is not None and span.end_time is not None
        assert run.start_time <= span.start_time <= span.end_time <= run.end_time
    assert all(span.status.status_code != StatusCode.ERROR for span in spans)


async def test_failures_set_error_status_with_the_stable_code() -> None:
    observer, exporter = tracing()

    async def broken(args: dict[str, Any], ctx: Any) -> Any:
        raise ToolFailure("disk_full", "no space left; free some and retry")

    model = scripted(
        {"tool_calls": [call("c1", "save", text="x")]},
        {"error": {"code": "rate_limited", "message": "slow down"}},
    )
    agent = make_agent(model, tools=[text_tool("save", handler=broken)])
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    outcome, _ = await prompt(session)
    assert outcome.error_code == "rate_limited"
    named = by_name(exporter.get_finished_spans())
    tool = named["execute_tool save"]
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.status.description == "no space left; free some and retry"
    assert tool.attributes is not None and tool.attributes["error.type"] == "disk_full"
    run = named["invoke_agent steerable-bridge"]
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes is not None and run.attributes["error.type"] == "rate_limited"
    failed_calls = [
        s for s in exporter.get_finished_spans()
        if s.name == "chat m" and s.status.status_code == StatusCode.ERROR
    ]  # fmt: skip
    assert len(failed_calls) == 1  # the second call, cut short by the provider error


async def test_message_content_is_recorded_only_when_asked() -> None:
    observer, exporter = tracing(capture_content=True)
    model = scripted({"tool_calls": [call("c1", "echo", text="secret")]}, {"text": "all done"})
    agent = make_agent(model, tools=[text_tool("echo")])
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    await prompt(session, "my private question")
    spans = exporter.get_finished_spans()
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time or 0)
    assert chats[0].attributes is not None
    inputs = json.loads(str(chats[0].attributes["gen_ai.input.messages"]))
    assert inputs[-1]["parts"][0]["content"] == "my private question"
    assert chats[1].attributes is not None
    outputs = json.loads(str(chats[1].attributes["gen_ai.output.messages"]))
    assert outputs[0]["parts"] == [{"type": "text", "content": "all done"}]
    tool = by_name(spans)["execute_tool echo"]
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"text": "secret"}
    assert tool.attributes["gen_ai.tool.call.result"] == "echo: secret"


async def test_a_callers_traceparent_is_continued() -> None:
    observer, exporter = tracing()
    agent = make_agent(scripted({"text": "hi"}))
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    from steerable_bridge.runtime.turns.turn import TurnInput
    from steerable_bridge.runtime.values import TextPart

    outcome = await session.prompt(
        TurnInput(content=(TextPart(text="hi"),), traceparent=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01")
    )
    assert outcome.trace_id == PARENT_TRACE
    run = by_name(exporter.get_finished_spans())["invoke_agent steerable-bridge"]
    assert format(run.context.trace_id, "032x") == PARENT_TRACE
    assert run.parent is not None and format(run.parent.span_id, "016x") == PARENT_SPAN
    started = of(session.log.view(), ev.RunStarted)[-1]
    assert started.trace_id == PARENT_TRACE


@pytest.mark.parametrize(("sampler", "exported"), [(ALWAYS_OFF, 0), (TraceIdRatioBased(1.0), 3)])
async def test_head_sampling_decides_what_is_exported(sampler: Any, exported: int) -> None:
    observer, exporter = tracing(sampler=sampler)
    agent = make_agent(scripted({"text": "hi"}))
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    _, seen = await prompt(session)
    assert len(exporter.get_finished_spans()) == exported  # run, step, model call
    # the trace id still rides in run_started when the trace is not sampled
    trace_id = of(seen, ev.RunStarted)[0].trace_id
    assert trace_id is not None and len(trace_id) == 32 and int(trace_id, 16) != 0


def test_from_env_reads_the_content_switch_and_refuses_unknown_exporters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    observer = OtelTracing.from_env()
    assert observer.capture_content
    resource = observer.provider.resource  # type: ignore[attr-defined]
    assert resource.attributes["service.name"] == "from-env"
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    unnamed = OtelTracing.from_env()
    assert not unnamed.capture_content
    assert unnamed.provider.resource.attributes["service.name"] == "steerable-bridge"  # type: ignore[attr-defined]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        OtelTracing.from_env()


async def test_a_caller_that_did_not_sample_is_followed_and_nothing_is_exported() -> None:
    observer, exporter = tracing(sampler=ParentBased(ALWAYS_ON))
    agent = make_agent(scripted({"text": "hi"}))
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    from steerable_bridge.runtime.turns.turn import TurnInput
    from steerable_bridge.runtime.values import TextPart

    outcome = await session.prompt(
        TurnInput(content=(TextPart(text="hi"),), traceparent=f"00-{PARENT_TRACE}-{PARENT_SPAN}-00")
    )
    assert outcome.trace_id == PARENT_TRACE
    assert exporter.get_finished_spans() == ()


async def test_exported_spans_are_sampled_share_the_resource_and_scope_and_end_children_first() -> (
    None
):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_agent(scripted({"tool_calls": [call("c1", "echo", text="x")]}, {"text": "ok"}),
                       tools=[text_tool("echo")])  # fmt: skip
    agent.observers = (OtelTracing(provider),)
    session = await agent.new_session("/tmp")
    await prompt(session)
    spans = exporter.get_finished_spans()
    assert len(spans) == 6
    assert spans[-1].name == "invoke_agent steerable-bridge"  # the run ends last
    ended = [span.context.span_id for span in spans]
    for span in spans:
        assert span.context.trace_flags.sampled
        assert span.resource.attributes["service.name"] == "svc"
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "steerable_bridge"
        if span.parent is not None:  # a parent ends after its children
            assert ended.index(span.parent.span_id) > ended.index(span.context.span_id)
    assert len(set(ended)) == 6


async def test_attribute_length_limit_from_the_environment_is_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "12")
    observer, exporter = tracing(capture_content=True)
    agent = make_agent(scripted({"text": "a reply longer than twelve characters"}))
    agent.observers = (observer,)
    session = await agent.new_session("/tmp")
    await prompt(session, "a question longer than twelve characters")
    chat = by_name(exporter.get_finished_spans())["chat m"]
    assert chat.attributes is not None
    assert len(str(chat.attributes["gen_ai.input.messages"])) == 12
    assert len(str(chat.attributes["gen_ai.output.messages"])) == 12
    assert chat.attributes["gen_ai.request.model"] == "m"
