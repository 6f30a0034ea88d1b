"""The editor as environment: fs and terminal requests routed through a real ACP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp

from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.ports.environment import WorkspaceError
from steerable_bridge.runtime.ports.tools import ToolContext
from steerable_bridge.runtime.values import TerminalContent, TextPart, ToolContent
from steerable_bridge.transports.acp.client_env import ClientEnvironment
from tests.adapters.tools.conftest import members_after_kill
from tests.transports.acp.editor_client import EditorClient, connected

pytestmark = pytest.mark.anyio

ALL = acp.ClientCapabilities(
    fs=acp.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("on disk\n")
    return root


@asynccontextmanager
async def editor_env(
    project: Path, client: EditorClient, caps: acp.ClientCapabilities | None = ALL
) -> AsyncIterator[ClientEnvironment]:
    local = LocalEnvironment(Workspace.of(str(project)))
    with anyio.fail_after(20):
        async with connected(client) as (agent_conn, _):
            yield ClientEnvironment(agent_conn, "sess_1", caps, local, io_timeout_s=5)


async def test_reads_and_writes_go_through_the_editor_and_its_buffer_wins(project: Path) -> None:
    app = str(project / "app.py")
    client = EditorClient({app: "unsaved\nbuffer\ntext\n"})
    async with editor_env(project, client) as env:
        assert await env.read_text(app) == "unsaved\nbuffer\ntext\n"
        assert await env.read_text(app, line=2, limit=1) == "buffer\n"
        await env.write_text(app, "new text\n")
    assert client.writes == [(app, "new text\n")]
    assert (project / "app.py").read_text() == "on disk\n"
    assert client.calls == ["fs/read_text_file"] * 2 + ["fs/write_text_file"]


async def test_without_the_capability_the_local_disk_is_used(project: Path) -> None:
    client = EditorClient({str(project / "app.py"): "unsaved\n"})
    async with editor_env(project, client, caps=acp.ClientCapabilities()) as env:
        assert await env.read_text(str(project / "app.py")) == "on disk\n"
        result = await env.run("echo local", cwd=str(project), timeout_s=5, output_limit=100)
    assert result.output == "local\n" and result.terminal_id is None
    assert client.calls == []


async def test_paths_outside_never_reach_the_editor(project: Path, tmp_path: Path) -> None:
    client = EditorClient()
    async with editor_env(project, client) as env:
        with pytest.raises(WorkspaceError) as info:
            await env.write_text(str(tmp_path / "elsewhere.txt"), "x")
        assert info.value.code == "outside_workspace"
        with pytest.raises(WorkspaceError) as info:
            await env.read_text(str(project / "missing.py"))
        assert info.value.code == "client_fs_error"
    assert client.writes == []


async def test_a_command_runs_in_an_editor_terminal(project: Path) -> None:
    client = EditorClient()
    seen: list[str] = []

    async def on_terminal(terminal_id: str) -> None:
        seen.append(terminal_id)

    async with editor_env(project, client) as env:
        result = await env.run_in_terminal(
            "echo hello; exit 2",
            cwd=str(project),
            timeout_s=10,
            output_limit=1000,
            on_terminal=on_terminal,
        )
    assert result.exit_code == 2 and result.output == "hello\n" and not result.timed_out
    assert result.terminal_id == "term-1" and seen == ["term-1"]
    assert client.calls == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]


async def test_a_command_that_times_out_is_killed_then_released(project: Path) -> None:
    client = EditorClient()
    async with editor_env(project, client) as env:
        result = await env.run(
            "sleep 30 & sleep 30", cwd=str(project), timeout_s=0.5, output_limit=1000
        )
    assert result.timed_out and result.exit_code is None
    assert client.calls == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert await members_after_kill(client.pgids[0]) == []


async def test_cancelling_a_command_kills_and_releases_its_terminal(project: Path) -> None:
    client = EditorClient()
    async with editor_env(project, client) as env:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: env.run("sleep 30", cwd=str(project), timeout_s=60, output_limit=100)
            )
            with anyio.fail_after(5):
                while "terminal/wait_for_exit" not in client.calls:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert client.calls[-2:] == ["terminal/kill", "terminal/release"]
    assert await members_after_kill(client.pgids[0]) == []


async def test_run_command_embeds_the_terminal_as_soon_as_it_exists(project: Path) -> None:
    client = EditorClient()
    streamed: list[tuple[ToolContent, ...]] = []

    async def output(content: tuple[ToolContent, ...]) -> None:
        streamed.append(content)

    async def nothing(*_: Any) -> None:
        return None

    async with editor_env(project, client) as env:
        run = {tool.name: tool for tool in workspace_tools(env.workspace)}["run_command"]
        ctx = ToolContext(
            session_id="sess_1",
            run_id="r",
            call_id="c",
            cwd=str(project),
            environment=env,
            output=output,
            update_plan=nothing,
            patch_state=nothing,
            state=lambda: None,
        )
        result = await run.handler({"command": "echo via terminal"}, ctx)
    assert streamed == [(TerminalContent(terminal_id="term-1"),)]
    assert result.content[0] == TerminalContent(terminal_id="term-1")
    assert isinstance(result.content[1], TextPart)
    assert result.content[1].text == "via terminal\n[exit code 0]"
    assert result.error is None


class RefusingEditor(EditorClient):
    """An editor that refuses reads the way acpx does: -32603 with the reason in details."""

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> Any:
        from acp import RequestError

        raise RequestError.internal_error({"details": "Permission denied for fs/read_text_file"})


async def test_an_editors_refusal_keeps_its_reason_for_the_model_and_the_user(
    project: Path,
) -> None:
    app = str(project / "app.py")
    async with editor_env(project, RefusingEditor({app: "x"})) as env:
        with pytest.raises(WorkspaceError) as refused:
            await env.read_text(app)
    assert refused.value.code == "client_fs_error"
    assert "Permission denied for fs/read_text_file" in refused.value.message
