"""The bridged agent's files and terminals: served inside the workspace, refused outside it
or without one, with the environment's code and remedy."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError
from acp import schema as acp

from steerable_bridge.adapters.tools.confinement import CommandPolicy
from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.transports.acp.bridge.workspace import WORKSPACE_CODE, ChildWorkspace

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def served(root: Path) -> ChildWorkspace:
    environment = LocalEnvironment(Workspace.of(str(root)), policy=CommandPolicy(sandbox="off"))
    return ChildWorkspace(environment, str(root))


async def test_files_inside_are_read_and_written_and_outside_refused(tmp_path: Path) -> None:
    workspace = served(tmp_path)
    await workspace.write_text_file(str(tmp_path / "a.txt"), "one\ntwo\n")
    assert await workspace.read_text_file(str(tmp_path / "a.txt"), 2, 1) == "two\n"
    with pytest.raises(RequestError) as refused:
        await workspace.read_text_file("/etc/hostname", None, None)
    assert refused.value.code == WORKSPACE_CODE
    assert refused.value.data == {"code": "outside_workspace"}


async def test_without_a_workspace_every_request_is_refused_naming_the_option() -> None:
    workspace = ChildWorkspace(None, None)
    with pytest.raises(RequestError) as refused:
        await workspace.write_text_file("/tmp/x", "y")
    assert "--workspace DIR" in str(refused.value)
    with pytest.raises(RequestError):
        workspace.create_terminal("ls", None, None, None, None)


async def test_a_terminal_runs_its_command_and_reports_output_and_exit(tmp_path: Path) -> None:
    workspace = served(tmp_path)
    async with anyio.create_task_group() as tasks:
        workspace.bind(tasks)
        terminal = workspace.create_terminal(
            "sh",
            ["-c", "echo $GREETING; exit 3"],
            [acp.EnvVariable(name="GREETING", value="hello there")],
            str(tmp_path),
            None,
        )
        with anyio.fail_after(30):
            exited = await workspace.wait_for_exit(terminal)
        assert exited.exit_code == 3
        output = workspace.output(terminal)
        assert output.exit_status is not None and output.exit_status.exit_code == 3
        assert "hello there" in output.output
        workspace.release(terminal)
        with pytest.raises(RequestError):
            workspace.output(terminal)


async def test_a_running_terminal_reports_what_it_has_printed_so_far(tmp_path: Path) -> None:
    workspace = served(tmp_path)
    script = "printf 'started\\n'; while [ ! -e go ]; do sleep 0.05; done; printf 'finished\\n'"
    async with anyio.create_task_group() as tasks:
        workspace.bind(tasks)
        terminal = workspace.create_terminal("sh", ["-c", script], None, str(tmp_path), None)
        with anyio.fail_after(30):  # as an agent polls terminal/output while it runs
            while "started" not in workspace.output(terminal).output:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        meanwhile = workspace.output(terminal)
        assert meanwhile.exit_status is None and meanwhile.output == "started\n"
        (tmp_path / "go").touch()
        with anyio.fail_after(30):
            exited = await workspace.wait_for_exit(terminal)
        assert exited.exit_code == 0
        assert workspace.output(terminal).output == "started\nfinished\n"
