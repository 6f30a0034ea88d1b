"""Both bridges proven on real third-party software, each on the local fake model servers.

`serve --acp-agent` runs a real ACP agent (claude-agent-acp, codex-acp, fast-agent;
`thirdparty.py`) as its child, with a SQLite store, and is driven by the official
`@ag-ui/client` (`agui_client.mjs`) and by CopilotKit (its runtime and `@copilotkit/core`,
`copilotkit_client.mjs`), each in its `--bridged` mode on a thread of its own, one client
after the other: a text turn; a `[use-a-tool]` turn whose permission request becomes the
run's interrupt, approved with `resume` (the after-tool text comes back, the tool result
reached the model); a long answer the client aborts (the agent must hang up on the fake
model: `session/cancel` reached it) followed by a turn that works; then `serve` is restarted
on the same store and both clients continue their threads: the model request for the new
message must carry the exchange from before the restart. The serve process gets the
launch's isolated environment (HOME, config folders, the fake's URL and key), which its
child inherits. `acp --agui-url` runs in front of a real AG-UI server (pydantic-ai,
LangGraph), driven by the ACP SDK's client side: a text prompt must come back as
agent_message_chunk, and the model request of a second prompt must carry the first exchange.
Without node, the npm packages, uv or (for fast-agent) Python 3.12, the tests skip with a
warning.
"""

from __future__ import annotations

import json
import os
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

from tests.interop.fake_models import FakeModel, FakeModelServer
from tests.interop.thirdparty import AgentLaunch, read_line
from tests.transports.agui.bridge.harness import EditorSide, bridge, prompt_blocks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SERVE = [sys.executable, "-m", "steerable_bridge", "serve", "--port", "0", "--storage", "memory"]
HERE = Path(__file__).resolve().parent
DRIVER_TIMEOUT_S = 150.0
"""How long a node client may take for the turns of one side of the restart."""
NODE_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin"),
    "COPILOTKIT_TELEMETRY_DISABLED": "true",
    "DO_NOT_TRACK": "1",
}


@contextmanager
def bridged(launch: AgentLaunch, log: Path, storage: Path) -> Iterator[str]:
    """`serve --acp-agent LAUNCH --workspace WS --storage DB` in the launch's environment;
    yields the endpoint URL once it answers, and stops the server (its child with it) after
    the block."""
    args = ["--acp-agent", launch.command_line, "--workspace", str(launch.workspace)]
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*SERVE, "--storage", str(storage), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**launch.env, "STEERABLE_DEMO_PACE_MS": "0"},
            cwd=launch.workspace,
            text=True,
        )
        try:
            first = read_line(process, 60)
            assert first.startswith("steerable-bridge: AG-UI endpoint POST http://"), (
                first + log.read_text()
            )
            url = first.split()[-1]
            with httpx.Client(timeout=10) as client:
                for _ in range(400):  # bound before the line is printed; listening just after
                    try:
                        client.get(url.removesuffix("/agent") + "/health")
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


class Driver:
    """One node client (`agui_client.mjs` or `copilotkit_client.mjs`) in its `--bridged` mode:
    it prints one JSON line for the turns before the restart, then waits for the URL of the
    restarted server and prints one for the turn after it."""

    def __init__(self, node: str, script: str, url: str, fake: FakeModel, tmp: Path) -> None:
        self.tag = script.removesuffix("_client.mjs")
        self.stderr = (tmp / f"{self.tag}.stderr").open("w+")
        self.process = subprocess.Popen(
            [
                node,
                script,
                url,
                "--bridged",
                self.tag,
                fake.trigger,
                fake.long_marker,
                fake.long_text[:5],
            ],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env={**NODE_ENV, "HOME": str(tmp)},
        )

    def report(self) -> dict[str, Any]:
        line = read_line(self.process, DRIVER_TIMEOUT_S)
        self.stderr.seek(0)
        assert line, f"{self.tag} printed nothing:\n{self.stderr.read()[-4000:]}"
        report: dict[str, Any] = json.loads(line)
        return report

    def restarted(self, url: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(url + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.stderr.close()


def _ended_well(run: Mapping[str, Any], why: str) -> None:
    """A run the client saw end normally: RUN_STARTED .. RUN_FINISHED, no error."""
    assert run["error"] is None, why
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED", why
    assert "RUN_ERROR" not in run["types"], why


@pytest.fixture(params=["claude_acp", "codex_acp", "fast_agent_acp"])
def agent(request: pytest.FixtureRequest) -> AgentLaunch:
    launch: AgentLaunch = request.getfixturevalue(request.param)
    return launch


def test_official_clients_drive_a_real_acp_agent_behind_serve_across_a_restart(
    agent: AgentLaunch, fake_models: FakeModelServer, tmp_path: Path, node: str
) -> None:
    fake = fake_models.model
    storage = tmp_path / "sessions.db"
    logs = [tmp_path / "serve-1.log", tmp_path / "serve-2.log"]
    drivers: list[Driver] = []
    before: list[dict[str, Any]] = []
    try:
        with bridged(agent, logs[0], storage) as url:
            for script in ("agui_client.mjs", "copilotkit_client.mjs"):
                drivers.append(Driver(node, script, url, fake, tmp_path))
                before.append(drivers[-1].report())  # one client after the other
        with bridged(agent, logs[1], storage) as url:
            for driver in drivers:
                driver.restarted(url)
            after = [driver.report() for driver in drivers]
    finally:
        for driver in drivers:
            driver.close()
    served = "\n".join(log.read_text()[-3000:] for log in logs)
    for driver, first, second in zip(drivers, before, after, strict=True):
        why = f"{agent.name} {agent.version} via {driver.tag}: {{}}\n{served}"
        assert first.get("warnings", []) == [] and first.get("errors", []) == [], why.format(first)
        assert second.get("warnings", []) == [] and second.get("errors", []) == [], why
        hello, asked, approved = first["hello"], first["asked"], first["approved"]
        _ended_well(hello, why.format(hello))
        assert fake.text in hello["text"], why.format(hello)

        # The agent's permission request is the run's interrupt; `resume` approves it.
        _ended_well(asked, why.format(asked))
        assert asked["outcome"]["type"] == "interrupt", why.format(asked)
        assert len(asked["outcome"]["interrupts"]) == 1, why.format(asked)
        assert "TOOL_CALL_START" in asked["types"], why.format(asked)
        _ended_well(approved, why.format(approved))
        assert approved["outcome"] == {"type": "success"}, why.format(approved)
        assert fake.after_tool in approved["text"], why.format(approved)

        # Cancel: the client gave up mid-answer without an error of its own (the @ag-ui/client
        # closes an aborted stream with a RUN_ERROR it makes itself), and the next run works.
        cancelled, then = first["cancelled"], first["after"]
        assert cancelled.get("aborted") or cancelled.get("stopped"), why.format(cancelled)
        assert cancelled["error"] is None, why.format(cancelled)
        assert "RUN_FINISHED" not in cancelled["types"], why.format(cancelled)
        _ended_well(then, why.format(then))
        assert then["outcome"] == {"type": "success"}, why.format(then)
        if agent.name != "claude-agent-acp":
            # claude-agent-acp 0.23.1 at times answers the prompt right after a cancel at
            # once, with no model request (driven directly too): only the clean end holds.
            assert fake.text in then["text"], why.format(then)

        # After the restart the thread goes on in the agent's own session: the model
        # request for the new message carries the exchange before the restart.
        continued = second["continued"]
        _ended_well(continued, why.format(continued))
        assert fake.text in continued["text"], why.format(continued)
        (request,) = [
            r for r in fake.requests if f"After the restart ({driver.tag})." in r.last_user_text
        ]
        carried = json.dumps(request.body)
        assert f"Say hello ({driver.tag})." in carried, why.format(carried[-2000:])
        assert fake.after_tool in carried, why.format(carried[-2000:])
    # Each cancel reached the model: the agent got session/cancel and hung up on the fake.
    assert fake.cut_short == len(drivers), served
    assert fake.saw_tool_result(), "no tool result ever reached the model"
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
