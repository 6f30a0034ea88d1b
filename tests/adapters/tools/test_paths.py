"""Confinement: every way out of the workspace is refused, every way inside works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import WorkspaceError


def _code(workspace: Workspace, path: str) -> str:
    with pytest.raises(WorkspaceError) as info:
        workspace.resolve(path)
    return info.value.code


def test_relative_and_absolute_paths_inside_resolve(workspace: Workspace, project: Path) -> None:
    assert workspace.resolve("src/app.py") == str(project / "src" / "app.py")
    assert workspace.resolve(str(project / "README.md")) == str(project / "README.md")
    assert workspace.resolve("src/../README.md") == str(project / "README.md")
    assert workspace.resolve("") == str(project)
    assert workspace.resolve("new/file.txt") == str(project / "new" / "file.txt")


def test_dotdot_and_absolute_paths_outside_are_refused(workspace: Workspace, outside: Path) -> None:
    assert _code(workspace, "../outside/secret.txt") == "outside_workspace"
    assert _code(workspace, "src/../../outside") == "outside_workspace"
    assert _code(workspace, str(outside / "secret.txt")) == "outside_workspace"
    assert _code(workspace, "/etc/passwd") == "outside_workspace"
    with pytest.raises(WorkspaceError) as info:
        workspace.resolve("/etc/passwd")
    assert "only paths under" in info.value.message


def test_symlinks_inside_work_and_symlinks_out_are_refused(
    workspace: Workspace, project: Path, outside: Path
) -> None:
    (project / "inner_link.py").symlink_to(project / "src" / "app.py")
    (project / "out_file").symlink_to(outside / "secret.txt")
    (project / "out_dir").symlink_to(outside)
    (project / "dangling").symlink_to(outside / "not-yet-there.txt")
    assert workspace.resolve("inner_link.py") == str(project / "src" / "app.py")
    assert _code(workspace, "out_file") == "outside_workspace"
    assert _code(workspace, "out_dir/secret.txt") == "outside_workspace"
    assert _code(workspace, "dangling") == "outside_workspace"
    with pytest.raises(WorkspaceError) as info:
        workspace.resolve("out_file")
    assert "symbolic link" in info.value.message


def test_additional_directories_are_part_of_the_workspace(project: Path, outside: Path) -> None:
    wide = Workspace.of(str(project), [str(outside)])
    assert wide.resolve(str(outside / "secret.txt")) == str(outside / "secret.txt")
    assert wide.contains(str(outside))
    assert not wide.contains(str(outside) + "-sibling")
    with pytest.raises(WorkspaceError):
        Workspace.of("relative/cwd")


def test_a_file_replaced_by_a_symlink_after_the_check_is_not_followed(
    workspace: Workspace, project: Path, outside: Path
) -> None:
    checked = workspace.resolve("src/app.py")
    os.remove(checked)
    os.symlink(outside / "secret.txt", checked)  # the swap happens between check and use
    with pytest.raises(WorkspaceError) as info:
        workspace.open_file(checked, os.O_RDONLY)
    assert info.value.code == "outside_workspace"
    with pytest.raises(WorkspaceError):
        workspace.open_file(checked, os.O_WRONLY | os.O_CREAT)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_a_parent_folder_replaced_by_a_symlink_after_the_check_is_not_followed(
    workspace: Workspace, project: Path, outside: Path
) -> None:
    (outside / "app.py").write_text("outside copy\n")
    checked = workspace.resolve("src/app.py")
    os.rename(project / "src", project / "src-old")
    os.symlink(outside, project / "src")
    with pytest.raises(WorkspaceError) as info:
        workspace.open_file(checked, os.O_WRONLY)
    assert info.value.code == "outside_workspace"
    assert (outside / "app.py").read_text() == "outside copy\n"


def test_open_file_reports_missing_files_and_directories(
    workspace: Workspace, project: Path
) -> None:
    with pytest.raises(WorkspaceError) as info:
        workspace.open_file(str(project / "missing.txt"), os.O_RDONLY)
    assert info.value.code == "not_found"
    with pytest.raises(WorkspaceError) as info:
        workspace.open_file(str(project / "src"), os.O_RDONLY)
    assert info.value.code == "is_a_directory"
