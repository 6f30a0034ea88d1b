"""Interop: the official TypeScript clients replay the conformance scenarios.

`conformance_acp.mjs` drives `steerable-bridge acp` with `@agentclientprotocol/sdk` (every
update checked against its zod schema); `conformance_agui.mjs` drives live AG-UI servers with
`@ag-ui/client`'s `HttpAgent`. Any console warning fails the test. What the clients received
must decode to each scenario's expected story: the ACP event channel exactly, the ACP
updates on every kind they carry exactly, the AG-UI events (as the client handed them on)
exactly — apart from the `{}` state snapshot `HttpAgent` sends on every run; a run the
client aborts (cancel) shows a prefix on the wire, and the server's log the whole story.
Without node the tests are skipped loudly, never passed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.conformance import check_agui_stream, scenario_tools
from steerable_bridge.conformance.decode_acp import decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.live import agui_server
from steerable_bridge.conformance.mapping import acp_exact, row
from steerable_bridge.conformance.scenarios import (
    Scenario,
    load_scenarios,
    normalize,
    quality_json,
)
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent

HERE = Path(__file__).resolve().parent
SCENARIOS = load_scenarios()

pytestmark = pytest.mark.anyio


async def _node_report(node: str, script: str, plan: Any, tmp: Path, **env: str) -> Any:
    path = tmp / f"{script}.plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    with anyio.fail_after(100):
        done = await anyio.run_process(
            [node, script, str(path)],
            cwd=HERE,
            check=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{script} failed ({done.returncode}):\n{stderr[-4000:]}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def _fails(scenario: Scenario) -> bool:
    return bool(scenario.expected) and scenario.expected[-1]["kind"] == "run_failed"


@pytest.mark.timeout(110)
async def test_the_official_acp_client_replays_every_acp_scenario(
    tmp_path: Path, node: str
) -> None:
    chosen = [s for s in SCENARIOS if "acp" in s.transports]
    plan = []
    for scenario in chosen:
        script = tmp_path / f"{scenario.name}.script.json"
        script.write_text(scenario.script.model_dump_json(), encoding="utf-8")
        turns = [t.model_dump(mode="json") for t in scenario.turns]
        project = tmp_path / scenario.name  # one project each: "always" answers are per project
        project.mkdir()
        plan.append(
            {
                "name": scenario.name,
                "script": str(script),
                "maxSteps": scenario.max_steps,
                "quality": quality_json(scenario.quality),
                "cwd": str(project),
                "turns": turns,
            }
        )
    report = await _node_report(
        node,
        "conformance_acp.mjs",
        plan,
        tmp_path,
        ACP_PYTHON=sys.executable,
        ACP_TOOLS=str(scenario_tools.__file__),
    )
    assert report["warnings"] == []
    for scenario, got in zip(chosen, report["scenarios"], strict=True):
        errors = got["errors"]
        if _fails(scenario):
            assert got["stops"] == [None] and len(errors) == 1, errors
            assert errors[0].startswith("prompt failed"), errors
        else:
            assert errors == [], (scenario.name, errors)
        events: list[LoopEvent] = [codec.event_from_jsonable(e) for e in got["events"]]
        assert normalize(events) == scenario.expected, scenario.name
        updates = [
            {"sender": "agent", "message": {"jsonrpc": "2.0", "method": "session/update",
                                            "params": params}}
            for params in got["updates"]
        ]  # fmt: skip
        # the client advertised url elicitation: each completed url question came as an
        # elicitation/complete the SDK's zod schema accepted, for the question's id
        completed = [
            f"{e.session_id}/{e.question_id}" for e in events if isinstance(e, ev.QuestionCompleted)
        ]
        assert got["completed"] == completed, scenario.name
        # the client advertised session.compaction: a streamed compaction's start, pieces
        # and drop reach it too
        exact = functools.partial(acp_exact, compaction=True)
        shown = [e for e in decode_acp(updates, channel=False) if exact(e)]
        carried = [e for e in events if exact(e) and row(e.kind).acp_form == "update"]
        assert shown == carried, scenario.name
        # each compaction came as the v1.25 lifecycle (which the SDK's zod schema accepted:
        # `errors` is empty): opened, its summary piece by piece as the model wrote it (a
        # fold of tool results: its headline at once), then ended
        kinds = [params["update"]["sessionUpdate"] for params in got["updates"]]
        ends = sum(isinstance(e, ev.Compaction | ev.CompactionDropped) for e in events)
        pieces = sum(isinstance(e, ev.CompactionSummaryDelta) for e in events)
        folds = sum(isinstance(e, ev.Compaction) and not e.compaction_id for e in events)
        assert kinds.count("compaction_summary_chunk") == pieces + folds, scenario.name
        assert kinds.count("compaction_update") == 2 * ends, scenario.name


def _client_made(event: dict[str, Any]) -> bool:
    """The RUN_ERROR `HttpAgent` hands its subscribers itself when `abortRun()` stops a run."""
    return event["type"] == "RUN_ERROR" and event.get("code") == "abort" and "metadata" not in event


def _story(scenario: Scenario, events: list[LoopEvent]) -> list[dict[str, Any]]:
    if all(turn.state is None for turn in scenario.turns):
        events = [e for e in events if not (e.kind == "state_snapshot" and e.state_json == "{}")]
    return normalize(events)


@pytest.mark.timeout(90)
async def test_http_agent_replays_every_agui_scenario(tmp_path: Path, node: str) -> None:
    chosen = [s for s in SCENARIOS if "agui" in s.transports]
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(agui_server(s)) for s in chosen]
        plan = [
            {
                "name": s.name,
                "url": server.url,
                "threadId": f"interop-{s.name}",
                "turns": [
                    {
                        "prompt": t.prompt,
                        "state": t.state,
                        "frontendTools": [f.model_dump() for f in t.frontend_tools],
                        "toolResults": [a.model_dump() for a in t.tool_results],
                        "resume": [a.model_dump() for a in t.resume],
                        "answers": [q.model_dump(mode="json") for q in t.answers],
                        "steer": t.steer.model_dump() if t.steer else None,
                        "cancel": t.cancel.model_dump() if t.cancel else None,
                        "compact": t.compact,
                    }
                    for t in s.turns
                ],
            }
            for s, server in zip(chosen, servers, strict=True)
        ]
        report = await _node_report(node, "conformance_agui.mjs", plan, tmp_path)
        logs = [await x.log(f"interop-{s.name}") for s, x in zip(chosen, servers, strict=True)]
    assert report["warnings"] == []
    for scenario, got, log in zip(chosen, report["scenarios"], logs, strict=True):
        expected = scenario.expected
        assert _story(scenario, log) == expected, (
            f"{scenario.name}: the server logged another story"
        )
        for run in got["runs"]:
            assert run["error"] is None, (scenario.name, run["error"])
        received = [e for run in got["runs"] for e in run["events"] if not _client_made(e)]
        story = _story(scenario, decode_agui(received))
        if any(run["aborted"] for run in got["runs"]):
            # abortRun() cut the stream: what arrived is a valid prefix of the story.
            findings = check_agui_stream(received)
            assert {f.rule_id for f in findings} <= {"agui.one-terminal"}, findings
            assert story == expected[: len(story)] and len(story) < len(expected)
            continue
        assert check_agui_stream(received) == [], scenario.name
        assert story == expected, scenario.name
