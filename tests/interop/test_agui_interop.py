"""Interop: the official `@ag-ui/client` 1.0.0 `HttpAgent`, and the chat page in Chromium.

A real uvicorn on 127.0.0.1 (port 0) serves the AG-UI app on the demo model (instant pace)
with a permission-needing `write_file` test tool. `agui_client.mjs` runs every scenario
through `HttpAgent`; this test fails on any `[ag-ui]` console message and checks what the
client itself does not: each run ends with RUN_FINISHED and no RUN_ERROR (except the
scenario that asks for a model error, which must end with exactly one RUN_ERROR).
`agui_browser.mjs` drives the chat page in headless Chromium (a reply with a tool call, an
approval, and the Stop button cancelling the turn on the server) and saves a screenshot
under test-artifacts/. Without node or chromium the tests are skipped loudly, never passed.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.transports.agui.harness import agent_for, live_server, until

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parent.parent / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.anyio


def _chromium_present() -> bool:
    return CHROMIUM.exists()


async def _node_json(*args: str) -> Any:
    with anyio.fail_after(60):
        done = await anyio.run_process(
            list(args), cwd=HERE, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{args[1]} failed ({done.returncode}):\n{stderr[-4000:]}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.timeout(90)
async def test_http_agent_runs_every_scenario_cleanly(node: str) -> None:
    async with live_server(create_app(LocalPort(agent_for()))) as url:
        report = await _node_json(node, "agui_client.mjs", f"{url}/agent")
    assert report["warnings"] == []
    runs = {s["name"]: s["runs"] for s in report["scenarios"]}
    for name, scenario in runs.items():
        for run in scenario:
            assert run["types"][0] == "RUN_STARTED", (name, run["types"])
            if name == "model_error":
                assert run["types"][-1] == "RUN_ERROR" and run["types"].count("RUN_ERROR") == 1
                assert "RUN_FINISHED" not in run["types"]
                continue
            assert run["error"] is None, (name, run["error"])
            assert run["types"][-1] == "RUN_FINISHED", (name, run["types"])
            assert "RUN_ERROR" not in run["types"], name
    _, second = runs["chat"]
    assert len(second["messageIds"]) == len(set(second["messageIds"]))
    assert "and again" in second["text"]
    (tool_run,) = runs["reasoning_and_tool"]
    assert "REASONING_MESSAGE_CONTENT" in tool_run["types"] and tool_run["toolCalls"] == [
        "calculate"
    ]
    assert (
        tool_run["results"][0]["status"] == "completed"
        and "42" in tool_run["results"][0]["content"]
    )
    assert "ACTIVITY_SNAPSHOT" in runs["plan"][0]["types"]
    assert runs["shared_state"][0]["state"] == {"count": 1, "demo": "changed"}
    ask, answer = runs["frontend_tool"]
    assert ask["outcome"]["pendingToolCallIds"] and ask["toolCalls"] == ["show_card"]
    assert answer["results"][0]["content"] == "card shown" and "card shown" in answer["text"]
    interrupted, resumed = runs["approval"]
    assert interrupted["outcome"]["type"] == "interrupt"
    assert resumed["results"][0]["status"] == "completed"
    assert resumed["outcome"] == {"type": "success"}


@pytest.mark.timeout(90)
async def test_the_chat_page_streams_a_reply_and_a_tool_call_in_chromium(node: str) -> None:
    if not _chromium_present():
        reason = (
            "chromium is not installed (/usr/bin/chromium): the chat page browser test cannot run"
        )
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "agui-chat-page.png"
    shot.unlink(missing_ok=True)
    async with live_server(create_app(LocalPort(agent_for()))) as url:
        report = await _node_json(node, "agui_browser.mjs", f"{url}/", str(shot))
    assert any("That is how a tool call looks." in text for text in report["reply"])
    assert any("calculate" in text.lower() and "42" in text for text in report["tool"])
    assert report["reasoning"] and not report["reasoning"][0]["open"]  # collapsed
    assert report["errors"] == []
    assert len(report["approvals"]) == 1 and "approved" in report["approvals"][0]
    assert any("wrote demo-note.txt" in text for text in report["tool"])
    assert len(report["timelines"]) == 3  # one per run: chat, the interrupted write, resume
    assert not report["timelineOpen"]  # collapsed until clicked
    labels = [row["label"] for row in report["timelineRows"]]
    assert labels[0].startswith("run · end_turn")
    assert any(label.startswith("tool calculate · completed") for label in labels)
    assert sum(label.startswith("model ") for label in labels) == 2
    assert all(row["duration"].endswith(("ms", " s")) for row in report["timelineRows"])
    assert [m for m in report["console"] if m.startswith(("error", "pageerror"))] == []
    assert shot.stat().st_size > 1000


@pytest.mark.timeout(90)
async def test_the_chat_page_stop_button_cancels_the_turn_on_the_server(node: str) -> None:
    if not _chromium_present():
        reason = (
            "chromium is not installed (/usr/bin/chromium): the chat page browser test cannot run"
        )
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    agent = agent_for(DemoProvider(pace_ms=40))  # the intro takes seconds to stream
    app = create_app(LocalPort(agent))
    async with live_server(app) as url:
        report = await _node_json(node, "agui_browser.mjs", f"{url}/", "unused.png", "stop")
        threads = app.state.threads
        # The run's client left, so once it ended the server let go of its thread and
        # session: read the session from the store.
        await until(lambda: len(threads) == 0, 5.0)
        (record,) = (await agent.store.list()).records
        session = await agent.load_session(record.session_id)
    assert report["reply"] and "stopped" in report["notes"]
    assert "to use a real model" not in report["reply"][0].lower()  # cut short
    finished = [e for e in session.log.view() if isinstance(e, ev.RunFinished)]
    assert [f.stop_reason for f in finished] == ["cancelled"]
