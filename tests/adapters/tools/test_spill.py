"""Spilled tool output: saved under the state directory, readable only by its session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.spill import FileSpill, spilled_path
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.ports.tools import ToolContext

pytestmark = pytest.mark.anyio


def _ctx(session_id: str, cwd: Path) -> ToolContext:
    from steerable_bridge.adapters.tools.local_env import LocalEnvironment

    async def nothing(*args: object) -> None:
        return None

    return ToolContext(
        session_id=session_id,
        run_id="r",
        call_id="c",
        cwd=str(cwd),
        environment=LocalEnvironment(Workspace.of(str(cwd))),
        output=nothing,
        update_plan=nothing,
        patch_state=nothing,
        state=lambda: {},
    )


async def test_read_file_pages_through_its_own_sessions_spill(tmp_path: Path) -> None:
    spill = FileSpill()  # under $XDG_STATE_HOME, which the test fixture points at tmp
    path = await spill.save("sess_1", "call/1", "".join(f"line {i}\n" for i in range(100)))
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert spilled_path(path, "sess_1") is not None and spilled_path(path, "sess_2") is None
    workspace = tmp_path / "project"
    workspace.mkdir()
    tools = {t.name: t for t in workspace_tools(Workspace.of(str(workspace)))}
    read = tools["read_file"].handler
    result = await read({"path": path, "line": 10, "limit": 3}, _ctx("sess_1", workspace))
    assert "line 9\nline 10\nline 11" in result.content[0].text  # type: ignore[union-attr]
    with pytest.raises(Exception, match="outside"):
        await read({"path": path}, _ctx("sess_2", workspace))


async def test_forget_removes_one_sessions_spill_and_nothing_else(tmp_path: Path) -> None:
    spill = FileSpill(tmp_path / "spill")
    mine = await spill.save("sess_1", "c1", "one")
    await spill.save("sess_1", "c2", "two")
    theirs = await spill.save("sess_2", "c1", "three")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (tmp_path / "spill" / "sess_3").symlink_to(outside)
    await spill.forget("sess_1")
    await spill.forget("sess_3")  # a link is not followed out of the spill root
    await spill.forget("never_spilled")
    assert _left(mine, tmp_path / "spill" / "sess_1", theirs, outside / "keep.txt") == [
        False,
        False,
        True,
        True,
    ]


def _left(*paths: str | Path) -> list[bool]:
    return [Path(path).exists() for path in paths]


def test_the_spill_folder_is_in_the_same_state_folder_as_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steerable_bridge.adapters.tools.spill import default_root
    from steerable_bridge.commands.storage_choice import state_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for state_home in (str(tmp_path / "state"), "relative/state", ""):
        monkeypatch.setenv("XDG_STATE_HOME", state_home)  # a relative one is ignored (XDG)
        assert default_root() == Path(state_dir()) / "spill"
