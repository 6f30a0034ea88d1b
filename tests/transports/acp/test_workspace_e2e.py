"""The spawned `steerable-bridge acp` doing real work: editor fs and terminal, MCP servers.

A scripted model reads a file (served from the editor's unsaved buffer), writes one (through
the editor, after permission), runs a command (in an editor terminal the tool call embeds)
and calls a tool of a real stdio MCP server mounted through session/new — while a second
MCP server that fails to start is reported to the user and the session carries on. Closing
the session stops the MCP server's process group.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp

from tests.adapters.tools.conftest import live_group_members
from tests.adapters.tools.test_mcp import SERVER
from tests.transports.acp.editor_client import EditorClient
from tests.transports.acp.harness import running

pytestmark = pytest.mark.anyio

CAPS = acp.ClientCapabilities(
    fs=acp.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


UNSANDBOXED = ("--sandbox", "off")
"""The MCP servers here write beside the workspace and report host process groups, which
the sandbox would hide; tests/transports/acp/test_sandbox_exposure.py runs them confined."""


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def stdio(name: str, *args: str) -> acp.McpServerStdio:
    return acp.McpServerStdio(name=name, command=sys.executable, args=list(args), env=[])


async def test_an_editor_session_reads_writes_runs_and_uses_mcp_tools(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("saved on disk\n")
    pid_server = tmp_path / "pid_server.py"
    pid_server.write_text(
        "import os, runpy, sys\n"
        f"open({str(tmp_path / 'mcp.pgid')!r}, 'w').write(str(os.getpgrp()))\n"
        f"sys.argv = [{SERVER!r}]\n"
        f"runpy.run_path({SERVER!r}, run_name='__main__')\n"
    )
    rounds = [
        {"tool_calls": [call("r1", "read_file", path="app.py")]},
        {"tool_calls": [call("w1", "write_file", path="app.py", content="edited\n")]},
        {"tool_calls": [call("x1", "run_command", command="echo from-terminal")]},
        {"tool_calls": [call("m1", "mcp__notes__add_note", text="remember")]},
        {"text": "all done"},
    ]
    client = EditorClient({str(project / "app.py"): "unsaved buffer\n"})
    with anyio.fail_after(60):
        async with running(tmp_path, rounds, client=client, args=UNSANDBOXED) as run:  # type: ignore[arg-type]
            init = await run.conn.initialize(protocol_version=1, client_capabilities=CAPS)
            assert init.agent_capabilities is not None
            mcp_caps = init.agent_capabilities.mcp_capabilities
            assert mcp_caps is not None and mcp_caps.http and mcp_caps.sse
            created = await run.conn.new_session(
                cwd=str(project),
                mcp_servers=[
                    stdio("notes", str(pid_server)),
                    stdio("broken", SERVER, "--crash"),
                ],
            )
            sid = created.session_id
            block = acp.TextContentBlock(type="text", text="do the work")
            response = await run.conn.prompt(session_id=sid, prompt=[block])
            assert response.stop_reason == "end_turn"
            pgid = int((tmp_path / "mcp.pgid").read_text())
            assert live_group_members(pgid)
            await run.conn.close_session(session_id=sid)
            with anyio.fail_after(10):
                while live_group_members(pgid):  # noqa: ASYNC110
                    await anyio.sleep(0.05)

    updates = client.updates
    warnings = [
        u.content.text
        for u in updates
        if u.session_update == "agent_message_chunk" and "broken" in u.content.text
    ]
    assert warnings and "failed to start" in warnings[0]
    finished = {
        u.tool_call_id: u
        for u in updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    }
    assert set(finished) == {"r1", "w1", "x1", "m1"}
    read_text = finished["r1"].content[0].content.text
    assert read_text == "unsaved buffer\n"  # the editor's buffer, not the disk
    assert client.writes == [(str(project / "app.py"), "edited\n")]
    assert (project / "app.py").read_text() == "saved on disk\n"
    diff = finished["w1"].content[0]
    assert (
        diff.type == "diff" and diff.old_text == "unsaved buffer\n" and diff.new_text == "edited\n"
    )
    terminal = finished["x1"].content[0]
    assert terminal.type == "terminal" and terminal.terminal_id == "term-1"
    assert finished["x1"].raw_output["sandbox"] == "client"  # the editor's terminal ran it
    running_ = [
        u for u in updates if u.session_update == "tool_call_update" and u.status == "in_progress"
    ]
    markers = {u.tool_call_id: u.field_meta["steerable"]["sandbox"] for u in running_}
    assert markers == {"r1": None, "w1": None, "x1": "client", "m1": "none"}
    assert client.calls.count("terminal/release") == 1
    assert finished["m1"].content[0].content.text == "1 notes"
    starts = {u.tool_call_id: u for u in updates if u.session_update == "tool_call"}
    assert starts["r1"].kind == "read" and starts["r1"].title == "Read app.py"
    assert starts["r1"].locations[0].path == str(project / "app.py")
    assert starts["w1"].kind == "edit" and starts["x1"].kind == "execute"
    assert starts["m1"].kind == "other"
    assert client.calls.count("session/request_permission") == 3  # write, run, mcp tool


async def test_mcp_servers_stop_when_the_editor_disconnects(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pid_server = tmp_path / "pid_server.py"
    pid_server.write_text(
        "import os, runpy, sys\n"
        f"open({str(tmp_path / 'mcp.pgid')!r}, 'w').write(str(os.getpgrp()))\n"
        f"sys.argv = [{SERVER!r}]\n"
        f"runpy.run_path({SERVER!r}, run_name='__main__')\n"
    )
    with anyio.fail_after(60):
        async with running(tmp_path, [], client=EditorClient(), args=UNSANDBOXED) as run:  # type: ignore[arg-type]
            await run.conn.initialize(protocol_version=1, client_capabilities=CAPS)
            await run.conn.new_session(
                cwd=str(project), mcp_servers=[stdio("notes", str(pid_server))]
            )
            pgid = int((tmp_path / "mcp.pgid").read_text())
            assert live_group_members(pgid)
        with anyio.fail_after(15):
            while live_group_members(pgid):  # noqa: ASYNC110
                await anyio.sleep(0.05)


async def test_additional_directories_widen_the_workspace_and_nothing_else(
    tmp_path: Path,
) -> None:
    project, extra, elsewhere = tmp_path / "project", tmp_path / "extra", tmp_path / "elsewhere"
    for folder in (project, extra, elsewhere):
        folder.mkdir()
        (folder / "f.txt").write_text(f"in {folder.name}\n")
    rounds = [
        {
            "tool_calls": [
                call("a", "read_file", path=str(extra / "f.txt")),
                call("b", "read_file", path=str(elsewhere / "f.txt")),
                call("c", "read_file", path="../elsewhere/f.txt"),
            ]
        },
        {"text": "ok"},
    ]
    client = EditorClient()  # no fs capability below: reads hit the local disk
    with anyio.fail_after(30):
        async with running(tmp_path, rounds, client=client, args=UNSANDBOXED) as run:  # type: ignore[arg-type]
            init = await run.conn.initialize(
                protocol_version=1, client_capabilities=acp.ClientCapabilities()
            )
            session_caps = init.agent_capabilities.session_capabilities  # type: ignore[union-attr]
            assert session_caps is not None and session_caps.additional_directories is not None
            created = await run.conn.new_session(
                cwd=str(project), additional_directories=[str(extra)], mcp_servers=[]
            )
            block = acp.TextContentBlock(type="text", text="read around")
            await run.conn.prompt(session_id=created.session_id, prompt=[block])
    done = {
        u.tool_call_id: u
        for u in client.updates
        if u.session_update == "tool_call_update" and u.status in ("completed", "failed")
    }
    assert done["a"].status == "completed" and done["a"].content[0].content.text == "in extra\n"
    for refused in ("b", "c"):
        assert done[refused].status == "failed"
        assert "outside the workspace" in done[refused].content[0].content.text
