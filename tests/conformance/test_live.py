"""Every scenario through both REAL transports — `steerable-bridge acp` over stdio and the AG-UI
app under uvicorn on 127.0.0.1 — decodes to the expected story, and to the same story on
both wires; every transcript and stream keeps every rule."""

from __future__ import annotations

import pytest

from steerable_bridge.conformance import check_acp_transcript, check_agui_stream
from steerable_bridge.conformance.acp_rules import EVENT_METHOD
from steerable_bridge.conformance.decode_acp import decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.live import run_acp, run_agui
from steerable_bridge.conformance.mapping import acp_exact, row
from steerable_bridge.conformance.scenarios import (
    Scenario,
    load_scenarios,
    normalize,
    run_in_process,
)
from steerable_bridge.runtime.session_log.replay import coalesce_deltas

LIVE = [s for s in load_scenarios() if s.transports]


@pytest.mark.anyio
@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario", LIVE, ids=lambda s: s.name)
async def test_scenario_through_the_real_transports(scenario: Scenario) -> None:
    stories = {}
    if "acp" in scenario.transports:
        transcript = await run_acp(scenario, channel=True)
        assert check_acp_transcript(transcript) == []
        decoded = decode_acp(transcript)
        stories["acp"] = normalize(decoded)
        # The editor-facing messages of the same transcript carry every ACP-exact kind.
        plain = decode_acp(transcript, channel=False)
        assert [e for e in plain if acp_exact(e)] == [e for e in decoded if acp_exact(e)]
    if "agui" in scenario.transports:
        run = await run_agui(scenario)
        for exchange in run.exchanges:
            findings = check_agui_stream(exchange.events, run_input=exchange.run_input)
            # A client that disconnects (AG-UI's cancel) gets no terminal event, by design.
            allowed = {"agui.one-terminal"} if exchange.disconnected else set()
            assert {f.rule_id for f in findings} <= allowed, findings
        wire = normalize(decode_agui(run.received))
        assert normalize(run.log) == scenario.expected, "the AG-UI server logged another story"
        if run.cut:
            assert wire == scenario.expected[: len(wire)] and len(wire) < len(scenario.expected)
        else:
            stories["agui"] = wire
    for transport, story in stories.items():
        assert story == scenario.expected, f"{transport} told another story"
    if len(stories) == 2:
        assert stories["acp"] == stories["agui"]


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["one_tool", "permission_always", "provider_failure"])
async def test_a_client_without_the_event_channel_sees_every_exact_kind(name: str) -> None:
    (scenario,) = load_scenarios([name])
    transcript = await run_acp(scenario, channel=False)
    assert check_acp_transcript(transcript) == []
    assert not any(m.message.get("method") == EVENT_METHOD for m in transcript)
    local = await run_in_process(scenario)
    decoded = decode_acp(transcript)
    assert normalize([e for e in decoded if acp_exact(e)]) == normalize(
        [e for e in local if acp_exact(e) and e.run_id]
    )


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("channel", [True, False], ids=["channel", "editor"])
async def test_load_replays_the_whole_session_and_resume_replays_nothing(channel: bool) -> None:
    (scenario,) = load_scenarios(["permission_always"])
    transcript = await run_acp(scenario, channel=channel, reload=True)
    assert check_acp_transcript(transcript) == []
    load = next(i for i, m in enumerate(transcript) if m.message.get("method") == "session/load")
    live = decode_acp(transcript[:load], channel=channel)
    replayed = decode_acp(transcript[load:], channel=channel)
    if channel:
        assert replayed == live  # every event, exactly, before the load response
    else:
        # Replay re-sends every session/update (and echoes the user's prompts, which are
        # then exact too) with each message's deltas folded into one chunk; a run's end
        # lives in its prompt response, which is not replayed.
        updates = [e for e in live if acp_exact(e) and row(e.kind).acp_form == "update"]
        assert [e for e in replayed if e.kind != "user_message"] == [
            c.event for c in coalesce_deltas(updates)
        ]
        assert [e.kind for e in replayed].count("user_message") == 1
