"""Both bridges proven on real third-party software, each on the local fake model servers.

`serve --acp-agent` runs a real ACP agent (claude-agent-acp, codex-acp, fast-agent;
`thirdparty.py`) as its child and is driven over HTTP with AG-UI RunAgentInput bodies: a
text turn must finish with the fake's text in TEXT_MESSAGE_CONTENT, and a `[use-a-tool]`
turn must end in the permission interrupt the agent's `session/request_permission` becomes;
the next run resumes it approving and must finish with the fake's after-tool text, the tool
result having reached the model. The serve process gets the launch's isolated environment
(HOME, config folders, the fake's URL and key), which its child inherits. `acp --agui-url`
runs in front of a real AG-UI server (pydantic-ai, LangGraph), driven by the ACP SDK's
client side: a text prompt must come back as agent_message_chunk, and the model request of a
second prompt must carry the first exchange. Without node, the npm packages, uv or (for
fast-agent) Python 3.12, the tests skip with a warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from acp import schema as acp

from tests.interop.fake_models import FakeModelServer
from tests.interop.thirdparty import AgentLaunch
from tests.transports.acp.bridge.harness import kinds, run_input, text_of
from tests.transports.agui.bridge.harness import EditorSide, bridge, prompt_blocks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SERVE = [sys.executable, "-m", "steerable_bridge", "serve", "--port", "0", "--storage", "memory"]
RUN_TIMEOUT = httpx.Timeout(150.0, connect=10.0)


@contextmanager
def bridged(launch: AgentLaunch, log: Path) -> Iterator[tuple[httpx.Client, str]]:
    """`serve --acp-agent LAUNCH --workspace WS` in the launch's environment; yields a client
    and the endpoint URL, and stops the server (its child with it) after the block."""
    args = ["--acp-agent", launch.command_line, "--workspace", str(launch.workspace)]
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*SERVE, *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**launch.env, "STEERABLE_DEMO_PACE_MS": "0"},
            cwd=launch.workspace,
            text=True,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith("steerable-bridge: AG-UI endpoint POST http://"), (
                first + log.read_text()
            )
            url = first.split()[-1]
            with httpx.Client(timeout=RUN_TIMEOUT) as client:
                for _ in range(400):  # bound before the line is printed; listening just after
                    try:
                        client.get(url.removesuffix("/agent") + "/health")
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)
                yield client, url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def run(client: httpx.Client, url: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with client.stream("POST", url, json=dict(body)) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def approve(interrupt_id: str) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}]


@pytest.fixture(params=["claude_acp", "codex_acp", "fast_agent_acp"])
def agent(request: pytest.FixtureRequest) -> AgentLaunch:
    launch: AgentLaunch = request.getfixturevalue(request.param)
    return launch


def test_a_real_acp_agent_behind_serve_answers_text_and_a_tool_after_approval(
    agent: AgentLaunch, fake_models: FakeModelServer, tmp_path: Path
) -> None:
    fake = fake_models.model
    log = tmp_path / "serve.log"
    with bridged(agent, log) as (client, url):
        first = run(client, url, run_input("t1", "r1", "Say hello."))
        why = f"{agent.name} {agent.version}: {kinds(first)}\n{log.read_text()[-3000:]}"
        assert first[0]["type"] == "RUN_STARTED", why
        assert first[-1]["type"] == "RUN_FINISHED", why
        assert first[-1]["outcome"] == {"type": "success"}, why
        assert fake.text in text_of(first), why

        asked = run(client, url, run_input("t1", "r2", f"Please {fake.trigger} now."))
        why = f"{agent.name} {agent.version}: {asked[-1:]}\n{log.read_text()[-3000:]}"
        assert fake.tool_calls(), "the fake model was never asked in a way that calls a tool"
        outcome = asked[-1].get("outcome") or {}
        assert asked[-1]["type"] == "RUN_FINISHED" and outcome.get("type") == "interrupt", why
        assert "TOOL_CALL_START" in kinds(asked), why
        assert not fake.saw_tool_result(), "the tool ran before it was approved"
        interrupts = outcome["interrupts"]
        assert len(interrupts) == 1, why

        done = run(client, url, run_input("t1", "r3", resume=approve(interrupts[0]["id"])))
        why = f"{agent.name} {agent.version}: {kinds(done)}\n{log.read_text()[-3000:]}"
        assert done[-1]["type"] == "RUN_FINISHED", why
        assert done[-1]["outcome"] == {"type": "success"}, why
        assert fake.after_tool in text_of(done), why
    assert fake.saw_tool_result(), "the tool result never reached the model"
    if agent.name != "fast-agent":  # its tool is the MCP `lookup`, which writes nothing
        assert (agent.workspace / "fake-model-was-here.txt").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["pydantic_ai_agui", "langgraph_agui"])
async def test_acp_agui_bridge_in_front_of_a_real_server_answers_and_keeps_the_conversation(
    server: str, fake_models: FakeModelServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(server)
    fake = fake_models.model
    editor = EditorSide()
    async with bridge(url, editor, tmp_path) as conn:
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        with anyio.fail_after(120):
            first = await conn.prompt(
                session_id=session.session_id, prompt=prompt_blocks("Say hello.")
            )
        assert first.stop_reason == "end_turn", editor.updates
        assert fake.text in editor.text(), editor.updates
        assert len(fake.requests) == 1, [r.path for r in fake.requests]

        seen = len(editor.updates)
        with anyio.fail_after(120):
            second = await conn.prompt(
                session_id=session.session_id, prompt=prompt_blocks("And again, please.")
            )
        assert second.stop_reason == "end_turn", editor.updates[seen:]
        again = "".join(
            u.content.text for u in editor.updates[seen:] if isinstance(u, acp.AgentMessageChunk)
        )
        assert fake.text in again, editor.updates[seen:]
    assert len(fake.requests) == 2, [r.path for r in fake.requests]
    latest = fake.requests[-1]
    assert latest.last_user_text == "And again, please."
    messages = latest.body["messages"]
    said = [(m["role"], json.dumps(m.get("content"))) for m in messages]
    assert any(role == "user" and "Say hello." in text for role, text in said), said
    assert any(role == "assistant" and fake.text in text for role, text in said), said
