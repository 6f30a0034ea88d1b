"""`env` run by the model, with approval, never shows the agent's provider key on a wire.

Over ACP the real `steerable-bridge acp` process runs a scripted model that calls
`run_command env`; the editor allows it, and the whole JSON-RPC stream is searched for the
key. Over AG-UI the app runs the same call with `--approve all`-style approval. `--pass-env`
lets a named variable through, and only that one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.tools import bwrap
from steerable_bridge.adapters.tools.kit import fixed_workspace_tools
from steerable_bridge.adapters.tools.local_env import CommandPolicy
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.transports.acp.harness import running
from tests.transports.agui.harness import agent_for, asgi_client, post, run_input, user

pytestmark = pytest.mark.anyio

KEY = "sk-provider-key-4242"
OTHER = "tok-ci-secret-1717"
ROUNDS: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "e1", "name": "run_command", "arguments": {"command": "env"}}]},
    {"text": "done"},
]


@pytest.mark.parametrize("passed", [False, True])
async def test_acp_env_shows_no_provider_key(tmp_path: Path, passed: bool) -> None:
    project = tmp_path / "project"
    project.mkdir()
    secrets = {"OPENAI_API_KEY": KEY, "STEERABLE_API_KEY": KEY, "CI_DEPLOY_TOKEN": OTHER}
    args = ("--pass-env", "CI_DEPLOY_TOKEN") if passed else ()
    with anyio.fail_after(60):
        async with running(tmp_path, ROUNDS, env=secrets, args=args) as run:
            await run.init()
            sid = await run.new(project)
            response = await run.prompt(sid, "print the environment")
            assert response.stop_reason == "end_turn"
            wire = json.dumps([event.message for event in run.wire])
    assert "PATH=" in wire  # the command did run and its output went over the wire
    assert KEY not in wire
    assert (OTHER in wire) is passed
    marker = "bwrap" if await bwrap.probe(bwrap.find_bwrap()) else "none"
    updates = [u for u in run.client.updates_of("tool_call_update") if u.tool_call_id == "e1"]
    started = [u for u in updates if u.status == "in_progress"]
    assert started[0].field_meta["steerable"]["sandbox"] == marker
    assert updates[-1].raw_output["sandbox"] == marker


@pytest.mark.parametrize("passed", [False, True])
async def test_agui_env_shows_no_provider_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passed: bool
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("CI_DEPLOY_TOKEN", OTHER)
    policy = CommandPolicy(pass_env=frozenset({"CI_DEPLOY_TOKEN"} if passed else ()))
    provider = ScriptedProvider(Script.model_validate({"rounds": ROUNDS}))
    tools = [
        t for t in fixed_workspace_tools(str(tmp_path), policy=policy) if t.name == "run_command"
    ]
    agent = agent_for(provider, approval="all", tools=tools)
    async with asgi_client(create_app(LocalPort(agent), cwd=str(tmp_path))) as client:
        response, frames = await post(client, run_input("t1", "r1", [user("u1", "env please")]))
    assert response.status_code == 200
    wire = json.dumps(frames)
    assert "PATH=" in wire
    assert KEY not in wire
    assert (OTHER in wire) is passed
    marker = "bwrap" if await bwrap.probe(bwrap.find_bwrap()) else "none"
    started = [f for f in frames if f.get("name") == "steerable.tool_started"]
    assert started[0]["value"]["sandbox"] == marker
    result = next(f for f in frames if f["type"] == "TOOL_CALL_RESULT")
    raw = json.loads(result["metadata"]["steerable"]["raw_output_json"])
    assert raw["sandbox"] == marker
