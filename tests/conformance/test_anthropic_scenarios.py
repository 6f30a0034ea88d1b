"""The scenario corpus, replayed through the Anthropic adapter: each scripted round becomes
the Messages-API SSE stream the real API would send for it (text, thinking with a signature,
tool use with fragmented JSON, an `error` event for a failing round, a stream that hangs for
the cancel stories), served by the fake API on 127.0.0.1; the loop on `AnthropicProvider` must
tell the same story as on the scripted model.

Two differences are by design and normalised here: Anthropic seals each thinking block, so
`reasoning_end` carries the stream's signature; and a failing round (streamed as the API's
mid-stream `rate_limit_error` event) surfaces with the adapter's own error message — its
code, `rate_limited`, is compared as is.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.scripted import ScriptedProvider
from steerable_bridge.conformance.scenarios import (
    ROUTE,
    Scenario,
    load_scenarios,
    normalize,
    run_in_process,
)
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.compaction import SUMMARY_SYSTEM
from steerable_bridge.runtime.ports.model import ModelRequest
from tests.adapters.llm.fake_anthropic import Answer, Recorder, from_round, ok, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SCENARIOS = load_scenarios()
SIGNATURE = "sig-scripted"


async def answers(scenario: Scenario) -> list[Answer]:
    for round_ in scenario.script.rounds:
        if round_.error is not None:  # streamed as the API's mid-stream `error` event
            assert round_.error.code == "rate_limited", "the fake API can only rate-limit"
    rounds = list(scenario.script.rounds)
    summaries = list(scenario.script.summary_rounds)
    if not summaries:
        return [ok(from_round(round_)) for round_ in rounds]
    # Compaction summaries are one-off calls between the rounds: learn where from the
    # scripted model, then answer in that order.
    order: list[bool] = []
    scripted = ScriptedProvider(scenario.script, route=ROUTE)
    stream = scripted.stream

    def spy(request: ModelRequest) -> Any:
        order.append(request.one_off)
        return stream(request)

    scripted.stream = spy  # type: ignore[method-assign]
    await run_in_process(scenario, provider=scripted)
    picked = [summaries.pop(0) if one_off else rounds.pop(0) for one_off in order]
    return [ok(from_round(round_)) for round_ in picked]


def unseal(events: list[ev.LoopEvent]) -> list[ev.LoopEvent]:
    out: list[ev.LoopEvent] = []
    for event in events:
        if isinstance(event, ev.ReasoningEnd):
            assert event.signature == SIGNATURE  # the seal reached the log
            event = dataclasses.replace(event, signature=None)
        out.append(event)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_scenario_on_the_anthropic_adapter(scenario: Scenario) -> None:
    assert not any(r.violation or r.delay_ms for r in scenario.script.rounds)
    rec = Recorder(await answers(scenario))
    # unpaced: the same odd-sized pieces, sent back to back. How the adapter reads a stream
    # cut anywhere is test_anthropic's subject (any boundaries; the paced live server); here
    # it is the story, and a 1 ms pause per piece made the corpus wait seconds.
    async with serve(rec, pace_s=0) as url:
        provider = AnthropicProvider(
            AnthropicConfig(
                model="claude-scenario",
                base_url=url,
                max_retries=0,
                context_window=scenario.script.context_window,  # as the script's model
            )
        )
        try:
            events = await run_in_process(scenario, provider=provider)
        finally:
            await provider.aclose()
    got = normalize(unseal(events))
    expected: list[dict[str, Any]] = [dict(item) for item in scenario.expected]
    for item, want in zip(got, expected, strict=False):
        if item["kind"] == want["kind"] == "run_failed":
            assert item["code"] == want["code"]
            item["message"] = want["message"]
    assert got == expected
    summaries = sum(
        isinstance(e, ev.Compaction) and e.scope == "history" and not e.fallback for e in events
    )
    assert len(rec.requests) == summaries + sum(isinstance(e, ev.ModelRequestEvent) for e in events)
    for body in rec.requests:
        assert body["model"] == "claude-scenario" and body["stream"] is True
        if body["system"][-1]["text"] == SUMMARY_SYSTEM:  # one-off: never cached
            assert "cache_control" not in json.dumps(body)
            continue
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
