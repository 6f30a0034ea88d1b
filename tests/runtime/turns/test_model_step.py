"""One model call (`runtime/turns/model_step.py`), driven through real turns: each chunk becomes
text / reasoning / tool-call events with explicit starts and ends, one kind closing the
other; a sealed reasoning chunk ends its block with the seal logged, a redacted one is a
block of its own; a tool call's parent is the text it followed, and its `tool_call_end`
carries the tool's kind, title and executor (plain defaults for a tool that is not
offered); tools a `pre_step` hook took off the request cannot be called; usage is logged as
`model_response` and `usage_updated`; an item that is not a chunk or a response fails the
run with `provider_protocol`. Overflow retries and the guessed-window notice are pinned in
`test_compaction.py` and `test_notices.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.turns.hooks import Hook, HookContext
from steerable_bridge.runtime.values import Usage
from tests.runtime.harness import (
    assert_well_formed,
    kinds,
    make_agent,
    of,
    prompt,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Streams:
    """A provider that streams the given items, one list per model call."""

    def __init__(self, *calls: Sequence[Any], context_window: int | None = None) -> None:
        self.calls = list(calls)
        self.window = context_window

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(route="test:streams", context_window=self.window)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        for item in self.calls.pop(0):
            yield item


END = ModelResponse(finish_reason="end_turn")


async def turn(provider: Any, **options: Any) -> list[ev.LoopEvent]:
    _, seen = await prompt(await make_agent(provider, **options).new_session("/w"))
    return seen


def stream_kinds(events: list[ev.LoopEvent]) -> list[str]:
    """The text, reasoning and tool-call events, in order."""
    keep = ("text_", "reasoning_", "tool_call_")
    return [k for k in kinds(events) if k.startswith(keep)]


async def test_text_and_reasoning_close_each_other_and_open_new_blocks() -> None:
    seen = await turn(Streams([
        ReasoningChunk(delta="think "),
        TextChunk(delta="say "),
        ReasoningChunk(delta="again"),
        TextChunk(delta="done"),
        END,
    ]))  # fmt: skip
    assert stream_kinds(seen) == [
        "reasoning_start", "reasoning_delta", "reasoning_end",
        "text_start", "text_delta", "text_end",
        "reasoning_start", "reasoning_delta", "reasoning_end",
        "text_start", "text_delta", "text_end",
    ]  # fmt: skip
    starts = [e.message_id for e in seen if isinstance(e, ev.TextStart | ev.ReasoningStart)]
    assert len(set(starts)) == 4  # every block has an id of its own
    assert_well_formed(seen)


async def test_a_sealed_reasoning_chunk_ends_its_block_with_the_seal() -> None:
    seen = await turn(Streams([
        ReasoningChunk(delta="first "),
        ReasoningChunk(delta="part", signature="sig-1"),
        ReasoningChunk(delta="", redacted_data="opaque"),
        ReasoningChunk(delta="next"),
        TextChunk(delta="answer"),
        END,
    ]))  # fmt: skip
    ends = of(seen, ev.ReasoningEnd)
    assert [(e.signature, e.redacted_data) for e in ends] == [
        ("sig-1", None), (None, "opaque"), (None, None),
    ]  # fmt: skip
    deltas = [e.delta for e in of(seen, ev.ReasoningDelta)]
    assert deltas == ["first ", "part", "next"]  # the redacted block has no text
    assert len(of(seen, ev.ReasoningStart)) == 3
    assert_well_formed(seen)


async def test_a_tool_call_closes_the_text_and_names_it_as_parent() -> None:
    seen = await turn(
        Streams(
            [
                TextChunk(delta="Let me echo."),
                ToolCallChunk(call_id="c1", name="echo", arguments_delta='{"text":'),
                ToolCallChunk(call_id="c1", arguments_delta=' "hi"}'),
                ModelResponse(finish_reason="tool_calls"),
            ],
            [TextChunk(delta="ok"), END],
        ),
        tools=[text_tool()],
    )
    text_id = of(seen, ev.TextStart)[0].message_id
    start, end = of(seen, ev.ToolCallStart)[0], of(seen, ev.ToolCallEnd)[0]
    assert start.parent_message_id == text_id
    assert kinds(seen).index("text_end") < kinds(seen).index("tool_call_start")
    assert end.arguments_json == '{"text": "hi"}'
    assert (end.tool_kind, end.executor) == ("read", "backend")
    assert of(seen, ev.StepFinished)[0].finish_reason == "tool_calls"
    assert_well_formed(seen)


async def test_a_call_without_text_has_the_assistant_message_as_parent() -> None:
    seen = await turn(
        Streams(
            [ToolCallChunk(call_id="c1", name="nowhere", arguments_delta="{}"), END],
            [TextChunk(delta="ok"), END],
        )
    )
    start, end = of(seen, ev.ToolCallStart)[0], of(seen, ev.ToolCallEnd)[0]
    assert start.parent_message_id.startswith("msg_")
    assert (end.tool_kind, end.title, end.executor) == ("other", "nowhere", "backend")
    assert of(seen, ev.StepFinished)[0].finish_reason == "tool_calls"  # calls, not end_turn


async def test_a_tool_a_pre_step_hook_took_off_the_request_cannot_be_called() -> None:
    def only_others(request: ModelRequest, ctx: HookContext) -> ModelRequest:
        return replace(request, tools=tuple(t for t in request.tools if t.name != "write"))

    agent = make_agent(
        scripted(
            {"tool_calls": [{"id": "c1", "name": "write", "arguments": {"text": "x"}}]},
            {"text": "ok"},
        ),
        tools=[text_tool(), text_tool("write")],
    )
    agent.hooks.register(Hook(name="narrow", pre_step=only_others))
    _, seen = await prompt(await agent.new_session("/w"))
    (result,) = of(seen, ev.ToolFinished)
    assert result.error is not None and result.error.code == "unknown_tool"
    assert "tools: echo" in result.error.message


async def test_usage_is_logged_with_the_window_and_the_cache_counts() -> None:
    usage = Usage(
        prompt_tokens=100, completion_tokens=20, cached_tokens=60, cache_creation_tokens=10
    )
    response = ModelResponse(finish_reason="end_turn", usage=usage, model="m-2025")
    seen = await turn(Streams([TextChunk(delta="hi"), response], context_window=8000))
    logged = of(seen, ev.ModelResponseEvent)[0]
    assert (logged.usage, logged.model, logged.finish_reason) == (usage, "m-2025", "end_turn")
    updated = of(seen, ev.UsageUpdated)[0]
    assert (updated.used, updated.size) == (120, 8000)
    assert (updated.cache_read_tokens, updated.cache_creation_tokens) == (60, 10)
    assert of(seen, ev.RunFinished)[0].usage == usage


async def test_an_item_that_is_no_chunk_fails_the_run_as_a_provider_bug() -> None:
    outcome, seen = await prompt(
        await make_agent(Streams([TextChunk(delta="hi"), "not a chunk"])).new_session("/w")
    )
    assert outcome.error_code == "provider_protocol"
    assert "unknown item str" in (outcome.error_message or "")
    assert_well_formed(seen)  # the open text was closed before the run failed
