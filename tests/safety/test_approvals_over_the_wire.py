"""Approvals as users meet them: "always" kept per project across processes, and
"Reject and stop" ending the turn on both wires."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.transports.agui.app import create_app
from tests.transports.acp.harness import Recorder, running
from tests.transports.agui.harness import WRITTEN, agent_for, asgi_client, post, run_input, user

pytestmark = pytest.mark.anyio


def command(call_id: str, text: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_command", "arguments": {"command": text}}


async def test_always_allow_is_kept_for_the_project_not_for_others(tmp_path: Path) -> None:
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    first = Recorder(answer="allow_always")
    with anyio.fail_after(60):
        rounds = [{"tool_calls": [command("a", "echo one")]}, {"text": "ok"}]
        async with running(tmp_path, rounds, client=first) as run:
            await run.init()
            await run.prompt(await run.new(project), "run it")
    assert len(first.permission_requests) == 1
    kept = json.loads((tmp_path / "approvals.json").read_text())
    assert list(kept["projects"]) == [str(project)]
    (entry,) = kept["projects"][str(project)].items()
    assert entry[0] == "run_command:echo" and entry[1]["answer"] == "allow"
    assert len(entry[1]["mac"]) == 64  # signed with the key kept in the state folder
    assert (tmp_path / "state" / "steerable-bridge" / "approvals.key").stat().st_mode & 0o077 == 0

    second = Recorder(answer="reject_once")
    rounds = [  # the second process's script
        {"tool_calls": [command("b", "echo two")]},
        {"text": "ok"},
        {"tool_calls": [command("c", "echo three")]},
        {"text": "ok"},
    ]
    with anyio.fail_after(60):
        async with running(tmp_path, rounds, client=second) as run:  # a new agent process
            await run.init()
            await run.prompt(await run.new(project), "again")
            assert second.permission_requests == []  # remembered for this project
            await run.prompt(await run.new(other), "elsewhere")
            assert len(second.permission_requests) == 1  # but not for another one
    finished = {
        u.tool_call_id: u.status
        for u in second.updates_of("tool_call_update")
        if u.status in ("completed", "failed")
    }
    assert finished == {"b": "completed", "c": "failed"}


async def test_acp_reject_and_stop_ends_the_prompt_cancelled(tmp_path: Path) -> None:
    rounds = [
        {"tool_calls": [command("a", "echo one"), command("b", "echo two")]},
        {"text": "the model is not called again"},
    ]
    client = Recorder(answer="reject_stop")
    with anyio.fail_after(60):
        async with running(tmp_path, rounds, client=client) as run:
            await run.init()
            response = await run.prompt(await run.new(tmp_path), "run two things")
    assert [o.option_id for o in client.permission_requests[0].options][-1] == "reject_stop"
    assert len(client.permission_requests) == 1
    assert response.stop_reason == "cancelled"
    assert response.field_meta["steerable"]["stop_reason"] == "rejected"
    texts = [u.content.text for u in client.updates_of("agent_message_chunk")]
    assert not any("not called again" in t for t in texts)


async def test_agui_resume_with_stop_ends_the_run_cancelled() -> None:
    WRITTEN.clear()
    app = create_app(agent_for(approval="ask"))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "write a note")]))
        (interrupt,) = first[-1]["outcome"]["interrupts"]
        assert interrupt["responseSchema"]["properties"]["stop"] == {"type": "boolean"}
        history = next(f for f in first if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        resume = [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"approved": False, "stop": True},
            }
        ]
        _, second = await post(client, run_input("t1", "r2", history, resume=resume))
    assert WRITTEN == {}
    result = next(f for f in second if f["type"] == "TOOL_CALL_RESULT")
    assert "stopped the turn" in result["content"]
    finished = second[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"] == {"type": "cancelled"}
    assert finished["metadata"]["steerable"]["stop_reason"] == "rejected"
    assert not [f for f in second if f["type"] == "STEP_STARTED"]  # no model call after it
