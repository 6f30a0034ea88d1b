"""Listing, globbing and grepping stay inside the workspace; grep works with and without rg."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from steerable_bridge.adapters.tools import search
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import WorkspaceError

pytestmark = pytest.mark.anyio

HAS_RG = shutil.which("rg") is not None


@pytest.fixture
def tree(project: Path, outside: Path) -> Path:
    (project / "src" / "pkg").mkdir()
    (project / "src" / "pkg" / "mod.py").write_text("import os\nTOKEN = 'needle'\n")
    (project / "src" / "notes.txt").write_text("a needle in text\n")
    (project / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    (project / ".hidden").write_text("needle hidden\n")
    (project / "leak.txt").symlink_to(outside / "secret.txt")
    (project / "leakdir").symlink_to(outside)
    (outside / "needle.py").write_text("needle outside\n")
    return project


def test_glob_patterns_compile_to_path_matchers() -> None:
    assert search.glob_regex("**/*.py").match("a/b/c.py")
    assert search.glob_regex("**/*.py").match("c.py")
    assert not search.glob_regex("*.py").match("a/c.py")
    assert search.glob_regex("src/?.md").match("src/a.md")
    assert search.glob_regex("[!a]*.txt").match("b.txt")
    assert not search.glob_regex("[!a]*.txt").match("a.txt")


async def test_list_dir_marks_folders_and_links(tree: Path, workspace: Workspace) -> None:
    found = await search.list_dir(workspace, ".")
    assert "src/" in found.lines
    assert "README.md" in found.lines
    assert any(line.startswith("leakdir -> ") for line in found.lines)
    with pytest.raises(WorkspaceError) as info:
        await search.list_dir(workspace, "leakdir")
    assert info.value.code == "outside_workspace"
    with pytest.raises(WorkspaceError):
        await search.list_dir(workspace, "..")


async def test_glob_never_walks_out_through_links(tree: Path, workspace: Workspace) -> None:
    found = await search.glob_files(workspace, "**/*.py", ".")
    assert found.lines == ("src/app.py", "src/pkg/mod.py")
    assert (await search.glob_files(workspace, "*.py", "src")).lines == ("src/app.py",)
    assert (await search.glob_files(workspace, "**/*.txt", ".")).lines == ("src/notes.txt",)
    with pytest.raises(WorkspaceError):
        await search.glob_files(workspace, "../outside/*", ".")


@pytest.mark.parametrize(
    "use_rg",
    [pytest.param(True, marks=pytest.mark.skipif(not HAS_RG, reason="rg not installed")), False],
    ids=["ripgrep", "python"],
)
async def test_grep_finds_text_inside_only(tree: Path, workspace: Workspace, use_rg: bool) -> None:
    found = await search.grep(workspace, "needle", ".", None, use_ripgrep=use_rg)
    assert sorted(found.lines) == [
        "src/notes.txt:1:a needle in text",
        "src/pkg/mod.py:2:TOKEN = 'needle'",
    ]
    only_py = await search.grep(workspace, r"TOKEN\s*=", "src", "*.py", use_ripgrep=use_rg)
    assert only_py.lines == ("src/pkg/mod.py:2:TOKEN = 'needle'",)
    none = await search.grep(workspace, "absent-word", ".", None, use_ripgrep=use_rg)
    assert none.lines == ()
    single = await search.grep(workspace, "return", "src/app.py", None, use_ripgrep=use_rg)
    assert single.lines == ("src/app.py:2:    return 1",)
    with pytest.raises(WorkspaceError) as info:
        await search.grep(workspace, "(unclosed", ".", None, use_ripgrep=use_rg)
    assert info.value.code == "invalid_pattern"
    with pytest.raises(WorkspaceError):
        await search.grep(workspace, "needle", "leakdir", None, use_ripgrep=use_rg)


async def test_grep_output_is_bounded(project: Path, workspace: Workspace) -> None:
    (project / "many.txt").write_text("hit\n" * 5000)
    found = await search.grep(workspace, "hit", ".", None, use_ripgrep=False)
    assert found.truncated and len(found.lines) == search.MAX_MATCHES
