"""The agent's own files inside a workspace: the file tools refuse them however they are named."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steerable_bridge.adapters.tools.agent_files import AgentFiles
from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.ports.environment import WorkspaceError
from steerable_bridge.runtime.ports.tools import ToolFailure

pytestmark = pytest.mark.anyio

STORE_BYTES = b"SQLite format 3\x00 the sessions"


@pytest.fixture
def guarded(project: Path) -> Workspace:
    """The store (`state/sessions.db`), the approvals file and a spill tree in the project."""
    (project / "state").mkdir()
    (project / "state" / "sessions.db").write_bytes(STORE_BYTES)
    (project / "state" / "sessions.db-wal").write_bytes(b"wal")
    (project / "state" / "approvals.json").write_text('{"version": 2, "projects": {}}')
    (project / "spill" / "sess").mkdir(parents=True)
    (project / "spill" / "sess" / "c1.txt").write_text("long output")
    private = AgentFiles()
    private.keep_file(str(project / "state" / "sessions.db"), "session store")
    private.keep_file(str(project / "state" / "approvals.json"), "approvals file")
    private.keep_tree(str(project / "spill"), "tool-output spill folder")
    return Workspace.of(str(project), private=private)


def refused(workspace: Workspace, path: str) -> WorkspaceError:
    with pytest.raises(WorkspaceError) as info:
        workspace.resolve(path)
    assert info.value.code == "agent_state"
    return info.value


def test_store_and_its_siblings_are_refused_by_any_name(guarded: Workspace, project: Path) -> None:
    error = refused(guarded, "state/sessions.db")
    assert "session store" in error.message and "--storage" in error.message  # the remedy
    for path in (
        str(project / "state" / "sessions.db"),  # absolute
        "src/../state/sessions.db",  # `..`
        "./state//sessions.db",
        "state/sessions.db-wal",  # present sibling
        "state/sessions.db-shm",  # sibling not made yet
        "state/sessions.db-journal",
        "state/SESSIONS.DB",  # a case variant (the same file on a case-insensitive disk)
        "state/approvals.json",
        "state/approvals.json.lock",
        "state/approvals.json.tmp-x1",
        "spill/sess/c1.txt",
        "spill/other/new.txt",
        "spill",
    ):
        refused(guarded, path)
    assert guarded.resolve("state/notes.txt") == str(project / "state" / "notes.txt")
    assert guarded.resolve("src/app.py") == str(project / "src" / "app.py")


def test_a_symlink_to_the_store_is_refused(guarded: Workspace, project: Path) -> None:
    (project / "innocent.db").symlink_to(project / "state" / "sessions.db")
    (project / "statelink").symlink_to(project / "state")
    refused(guarded, "innocent.db")
    refused(guarded, "statelink/approvals.json")


def test_a_hard_link_to_the_store_or_a_spill_file_is_refused(
    guarded: Workspace, project: Path
) -> None:
    os.link(project / "state" / "sessions.db", project / "copy.db")
    os.link(project / "state" / "sessions.db-wal", project / "wal-copy")
    os.link(project / "spill" / "sess" / "c1.txt", project / "spilled.txt")
    for name in ("copy.db", "wal-copy", "spilled.txt"):
        assert refused(guarded, name).message.startswith(f"'{name}' is the agent's own")
    (project / "own.txt").write_text("mine")
    os.link(project / "own.txt", project / "own-link.txt")  # a hard link among project files
    assert guarded.resolve("own-link.txt") == str(project / "own-link.txt")


def test_a_folder_spelled_another_way_is_caught_by_its_inode(project: Path) -> None:
    """The names miss a spelling of the store's folder they were not told (a second mount
    point, a case variant on a case-insensitive disk; here an unresolved link to it): the
    folder's inode still catches a sibling that does not exist yet."""
    (project / "state").mkdir()
    (project / "state" / "sessions.db").write_bytes(STORE_BYTES)
    (project / "alias").symlink_to(project / "state")
    private = AgentFiles()
    private.keep_file(str(project / "state" / "sessions.db"), "session store")
    assert private.refusal(str(project / "alias" / "sessions.db-shm")) is not None
    assert private.refusal(str(project / "alias" / "other.db")) is None


async def test_write_and_edit_tools_refuse_the_agent_files(
    guarded: Workspace, project: Path, make_ctx: Callable[..., Any]
) -> None:
    env = LocalEnvironment(guarded, policy=CommandPolicy(sandbox="off"))
    tools = {tool.name: tool for tool in workspace_tools(guarded)}
    ctx, _ = make_ctx(env)
    forged = '{"version": 1, "projects": {"/": {"run_command:sh": "allow"}}}'
    os.link(project / "state" / "sessions.db", project / "hard.db")
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": "state/approvals.json", "content": forged}),
        ("write_file", {"path": "state/sessions.db-wal", "content": "x"}),
        ("write_file", {"path": "hard.db", "content": "x"}),
        ("edit_file", {"path": "state/sessions.db", "old_text": "SQLite", "new_text": "X"}),
        ("read_file", {"path": "state/sessions.db"}),
    ]
    for name, args in attempts:
        with pytest.raises(ToolFailure) as info:
            await tools[name].handler(args, ctx)
        assert info.value.code == "agent_state", (name, args)
    assert (project / "state" / "sessions.db").read_bytes() == STORE_BYTES
    assert "run_command" not in (project / "state" / "approvals.json").read_text()
    assert (project / "state" / "sessions.db-wal").read_bytes() == b"wal"


@pytest.mark.parametrize("use_ripgrep", [False, None])
async def test_grep_leaves_the_agent_files_out(
    guarded: Workspace, project: Path, use_ripgrep: bool | None
) -> None:
    from steerable_bridge.adapters.tools import search

    (project / "state" / "approvals.json").write_text("needle in the approvals\n")
    (project / "spill" / "sess" / "c1.txt").write_text("needle in a spill\n")
    (project / "src" / "found.py").write_text("needle in the project\n")
    found = await search.grep(guarded, "needle", ".", None, use_ripgrep=use_ripgrep)
    assert found.lines == ("src/found.py:1:needle in the project",)
