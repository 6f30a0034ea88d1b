"""Whole turns through the loop on the Anthropic provider: signed thinking and redacted
thinking survive the session log and go back to the API with the tool results, unchanged;
cache counters reach `model_response` and `usage_updated`."""

from __future__ import annotations

import json

import pytest

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.values import ThinkingBlock
from tests.runtime.harness import make_agent, of, prompt, text_tool

from .fake_anthropic import Recorder, Stream, mock_transport, ok

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def test_thinking_with_tools_round_trips_through_the_log_to_the_next_request() -> None:
    first = (
        Stream()
        .start(input_tokens=50, created=1200)
        .thinking("I should ", "echo.", signature="sig-1")
        .redacted("REDACTED==")
        .tool_use("toolu_1", "echo", '{"te', 'xt":"hi"}')
        .stop("tool_use")
    )
    second = Stream().start(input_tokens=60, read=1200).text("Done.").stop()
    rec = Recorder([ok(first), ok(second)])
    provider = AnthropicProvider(
        AnthropicConfig(model="claude-test", base_url="http://127.0.0.1:9"),
        transport=mock_transport(rec),
    )
    session = await make_agent(provider, tools=[text_tool()]).new_session("/work")
    try:
        outcome, seen = await prompt(session, "say hi")
    finally:
        await provider.aclose()
    assert outcome.stop_reason == "end_turn"

    ends = of(seen, ev.ReasoningEnd)
    assert [(e.signature, e.redacted_data) for e in ends] == [
        ("sig-1", None),
        (None, "REDACTED=="),
    ]
    history = project_history(session.log.view())
    assistant = next(m for m in history if m.tool_calls)
    assert assistant.thinking == (
        ThinkingBlock(text="I should echo.", signature="sig-1"),
        ThinkingBlock(redacted_data="REDACTED=="),
    )

    sent = rec.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == [
        {"type": "thinking", "thinking": "I should echo.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "REDACTED=="},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hi"}},
    ]
    result = sent[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    assert result["content"][0]["text"] == "echo: hi"

    usage = [(u.cache_read_tokens, u.cache_creation_tokens) for u in of(seen, ev.UsageUpdated)]
    assert usage == [(0, 1200), (1200, 0)]
    responses = of(seen, ev.ModelResponseEvent)
    assert responses[1].usage.cached_tokens == 1200
    assert responses[1].usage.prompt_tokens == 1260
    finished = of(seen, ev.RunFinished)[0]
    assert finished.usage.cache_creation_tokens == 1200 and finished.usage.cached_tokens == 1200


async def test_compaction_summaries_are_sent_without_cache_anchors() -> None:
    from steerable_bridge.runtime.model_context.compaction import SUMMARY_SYSTEM
    from steerable_bridge.runtime.turns.turn import TurnInput

    rec = Recorder([ok(Stream().start(input_tokens=100).text("word " * 150).stop())])
    provider = AnthropicProvider(
        AnthropicConfig(model="claude-test", base_url="http://127.0.0.1:9", context_window=1200),
        transport=mock_transport(rec),
    )
    session = await make_agent(provider).new_session("/work")
    try:
        for i in range(3):
            await prompt(session, f"question {i}: " + "detail " * 150)
        outcome = await session.prompt(TurnInput(compact=True), None)
    finally:
        await provider.aclose()
    assert outcome.error_code is None
    assert of(list(session.log.view()), ev.Compaction)
    summaries = [r for r in rec.requests if r["system"][0]["text"] == SUMMARY_SYSTEM]
    steps = [r for r in rec.requests if r["system"][0]["text"] != SUMMARY_SYSTEM]
    assert summaries and steps
    assert all("cache_control" not in json.dumps(r) for r in summaries)  # one-off: no writes
    assert all(json.dumps(r).count("cache_control") == 2 for r in steps)  # system + tail
