"""`check acp` on recorded real agents: replayed offline, the verdicts stay as pinned.

Each `tests/fixtures/acp_agents/NAME.jsonl` is a `check acp --record` transcript of a real
agent installed from npm or PyPI (`record.py` beside it re-records them); `replay_agent.py`
plays the agent's side back. The recordings hold behaviour that used to be misjudged: a
session-level update after the `session/load` and `session/resume` responses
(claude-agent-acp), a -32700 answer without an id (codex-acp), a model failure answered as
a JSON-RPC -32603 with `data.details` (steerable-sidecar), a session/cancel that crossed an
instant turn's `end_turn` response (fast-agent). The pinned verdicts hold no false failure;
README.md beside the fixtures says why each remaining failure is real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from steerable_bridge.conformance.validators.agent_probes import AgentCheckSettings
from steerable_bridge.conformance.validators.check_acp import check_acp_agent

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "acp_agents"
REPLAY = FIXTURES / "replay_agent.py"
NAMES = sorted(p.name.removesuffix(".verdicts.json") for p in FIXTURES.glob("*.verdicts.json"))
SETTINGS = AgentCheckSettings(
    prompt_timeout=20, cancel_timeout=5, probe_timeout=1, quiet_period=0.3
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def test_there_are_recordings_of_four_real_agents() -> None:
    assert {"claude-agent-acp", "codex-acp", "fast-agent", "steerable-sidecar"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
async def test_a_replayed_real_agent_gets_its_pinned_verdicts(name: str) -> None:
    pinned = json.loads((FIXTURES / f"{name}.verdicts.json").read_text())["verdicts"]
    report = await check_acp_agent(
        [sys.executable, str(REPLAY), str(FIXTURES / f"{name}.jsonl")], settings=SETTINGS
    )
    got = {check.id: check.status for check in report.checks}
    assert got == pinned, report.to_text()


async def test_the_recordings_hold_the_once_misjudged_behaviour() -> None:
    def lines(name: str) -> list[dict[str, object]]:
        text = (FIXTURES / f"{name}.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    claude = lines("claude-agent-acp")
    load_answer = next(
        n
        for n, e in enumerate(claude)
        if "result" in e.get("message", {})
        and n > 0
        and claude[n - 1].get("message", {}).get("method") == "session/update"
        and "availableModes" in json.dumps(e["message"]["result"])
    )
    assert any("available_commands_update" in json.dumps(e) for e in claude[load_answer + 1 :])
    codex_errors = [e["message"] for e in lines("codex-acp") if "error" in e.get("message", {})]
    assert any(m["error"]["code"] == -32700 and "id" not in m for m in codex_errors)
    sidecar = [e["message"] for e in lines("steerable-sidecar") if "error" in e.get("message", {})]
    assert any(m["error"]["code"] == -32603 and m["error"].get("data") for m in sidecar)
    fast = lines("fast-agent")
    cancel = next(e for e in fast if e["message"].get("method") == "session/cancel")
    ended = next(e for e in fast if e["message"].get("result") == {"stopReason": "end_turn"}
                 and e["message"]["id"] == cancel_prompt_id(fast, cancel))  # fmt: skip
    assert abs(ended["at"] - cancel["at"]) < 0.01  # the cancel and the response crossed


def cancel_prompt_id(entries: list[dict[str, Any]], cancel: dict[str, Any]) -> object:
    session = cancel["message"]["params"]["sessionId"]
    return next(
        e["message"]["id"]
        for e in entries
        if e["message"].get("method") == "session/prompt"
        and e["message"]["params"]["sessionId"] == session
    )


async def test_a_cancel_that_crossed_the_response_could_not_be_checked() -> None:
    """fast-agent's passthrough turn is over within a millisecond: its `end_turn` was on its
    way (or read but not yet handled) when session/cancel was sent. That is legal (it owes
    `cancelled` only for a turn the cancel reached), so neither the probe nor the transcript
    rules may fail it."""
    report = await check_acp_agent(
        [sys.executable, str(REPLAY), str(FIXTURES / "fast-agent.jsonl")], settings=SETTINGS
    )
    got = {check.id: check for check in report.checks}
    assert got["agent.cancel.stop_reason"].status == "skipped", got["agent.cancel.stop_reason"]
    assert "acp.cancel-stop-reason" not in got
