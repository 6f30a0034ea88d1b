"""Every scenario, played through the real loop, gives its expected story; both renderings
of that story keep every rule and decode back to it."""

from __future__ import annotations

import pydantic
import pytest

from steerable_bridge.commands.quality_flag import parse_quality
from steerable_bridge.conformance import check_acp_transcript, check_agui_stream
from steerable_bridge.conformance.acp_wire import render_acp_transcript
from steerable_bridge.conformance.agui_wire import render_agui_stream
from steerable_bridge.conformance.decode_acp import decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.mapping import acp_exact
from steerable_bridge.conformance.scenarios import (
    Scenario,
    load_scenarios,
    normalize,
    quality_json,
    run_in_process,
)
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings

SCENARIOS = load_scenarios()
REFRESH = (
    "the loop no longer tells this story; if the change is deliberate, refresh it with"
    ' `uv run python -c "import anyio; from steerable_bridge.conformance.scenarios import'
    " refresh_expected; anyio.run(refresh_expected, 'PATH')\"`"
)


def test_the_corpus_covers_the_issue_list() -> None:
    names = {s.name for s in SCENARIOS}
    assert names >= {
        "plain_chat", "reasoning", "one_tool", "parallel_tools", "tool_error", "unknown_tool",
        "max_steps", "cancel_mid_stream", "cancel_mid_tool", "permission_allow",
        "permission_deny", "permission_always", "plan_updates", "steering", "follow_up",
        "provider_failure", "agui_frontend_tool", "agui_interrupt_resume", "agui_shared_state",
        "quality_recovery_dedup", "quality_soft_timeout", "quality_budget",
    }  # fmt: skip
    for scenario in SCENARIOS:
        assert scenario.expected, f"{scenario.name} has no expected sequence"
        assert set(scenario.transports) == {"acp", "agui"} or scenario.why_not


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_scenario_through_the_loop_and_both_renderings(scenario: Scenario) -> None:
    events = await run_in_process(scenario, timeout_s=20)
    assert normalize(events) == scenario.expected, REFRESH
    run_events = [e for e in events if e.run_id]

    stream = render_agui_stream(events)
    assert check_agui_stream(stream) == []
    assert decode_agui(stream) == run_events

    transcript = render_acp_transcript(events, channel=True)
    assert check_acp_transcript(transcript) == []
    assert decode_acp(transcript) == events
    plain = decode_acp(render_acp_transcript(events), channel=False)
    assert [e for e in plain if acp_exact(e)] == [e for e in events if acp_exact(e)]


def test_a_scenarios_quality_is_the_typed_value_the_flag_text_once_gave() -> None:
    by_name = {s.name: s.quality for s in SCENARIOS}
    assert by_name["quality_budget"] == parse_quality("on,max_tool_calls=1")
    assert by_name["quality_recovery_dedup"] == parse_quality("on")
    assert by_name["quality_soft_timeout"] == parse_quality("on,soft_timeout=0")
    assert by_name["plain_chat"] == parse_quality("off")  # left out: the layer is off


@pytest.mark.parametrize(
    "settings",
    [
        *(s.quality for s in SCENARIOS),
        QualitySettings(),
        QualitySettings(
            mode="on", recover_tool_calls=False, dedup=False, dedup_limit=0, error_breaker=9,
            soft_timeout_s=1.5, max_tool_calls=None, max_turn_tokens=1000,
            completion_retries=0, narrate_empty=False, tool_budget=4096,
        ),
    ],
)  # fmt: skip
def test_the_live_runs_quality_text_gives_the_cli_the_same_settings(
    settings: QualitySettings,
) -> None:
    """What `live.py` and the interop harness pass to `--quality` parses back unchanged,
    whatever base the command would otherwise start from."""
    text = quality_json(settings)
    assert parse_quality(text) == settings
    assert parse_quality(text, QualitySettings(mode="auto", dedup_limit=7)) == settings


def test_an_unknown_quality_field_is_refused_when_a_scenario_loads() -> None:
    data = SCENARIOS[0].model_dump(mode="json") | {"quality": {"mode": "on", "max_tools": 1}}
    with pytest.raises(pydantic.ValidationError, match=r"quality\.max_tools\n"):
        Scenario.model_validate(data)
