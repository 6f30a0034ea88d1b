"""The workspace kit per session, and the fixed workspace an AG-UI server gets with --workspace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge import cli
from steerable_bridge.adapters.tools.builtin import builtin_tools
from steerable_bridge.adapters.tools.kit import WorkspaceKit, fixed_workspace_tools
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from tests.adapters.tools.test_mcp import SERVER
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import asgi_client, create_app, post, run_input, user

pytestmark = pytest.mark.anyio


async def test_a_kit_offers_workspace_and_mcp_tools_and_stops_its_servers(
    project: Path,
) -> None:
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:

            def spawn(job: Any) -> None:
                tg.start_soon(job)

            kit = WorkspaceKit(str(project), (), spawn, start_timeout_s=10.0)
            problems = await kit.start_mcp(
                [
                    {"name": "notes", "command": sys.executable, "args": (SERVER,), "env": {}},
                    {"name": "bad", "command": sys.executable, "args": (SERVER, "--crash")},
                ]
            )
            names = {tool.name for tool in kit.tools()}
            assert {"read_file", "run_command", "update_plan", "mcp__notes__add_note"} <= names
            assert len(problems) == 1 and "'bad' failed to start" in problems[0]
            assert kit.environment.workspace.cwd == str(project)
            await kit.aclose()
            assert not any(name.startswith("mcp__") for name in (t.name for t in kit.tools()))


async def test_an_agui_server_with_a_workspace_reads_and_waits_for_approval_to_write(
    project: Path,
) -> None:
    model = scripted(
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {
            "tool_calls": [
                {
                    "id": "w1",
                    "name": "write_file",
                    "arguments": {"path": "README.md", "content": "x"},
                }
            ]
        },
    )
    names = {tool.name for tool in builtin_tools(shared_state=True)}
    tools = [
        *builtin_tools(shared_state=True),
        *(t for t in fixed_workspace_tools(str(project)) if t.name not in names),
    ]
    agent = make_agent(model, tools=tools, approval="ask")
    async with asgi_client(create_app(LocalPort(agent), cwd=str(project))) as client:
        _, wire = await post(client, run_input("t1", "run1", [user("u1", "read then write")]))
    results = [f for f in wire if f["type"] == "TOOL_CALL_RESULT"]
    assert results[0]["toolCallId"] == "r1" and "hello world" in results[0]["content"]
    finished = wire[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    assert (project / "README.md").read_text() == "# Demo\nhello world\n"


def test_serve_refuses_a_workspace_that_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["serve", "--workspace", str(tmp_path / "missing"), "--port", "0"])
    assert code == 2
    assert "is not a directory" in capsys.readouterr().err
