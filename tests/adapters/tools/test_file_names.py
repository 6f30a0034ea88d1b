"""File names that are not UTF-8: listed, globbed and grepped with a visible `\\xNN` escape
(text every encoder takes), and still readable by the name the listing showed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steerable_bridge.adapters.tools import search
from steerable_bridge.adapters.tools.file_names import on_disk, shown
from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.ports.tools import ToolResult
from steerable_bridge.runtime.values import TextPart

pytestmark = pytest.mark.anyio

MakeCtx = Callable[..., Any]
BAD = b"bad\xff name.txt"
SHOWN = "bad\\xff name.txt"


@pytest.fixture
def bad_file(project: Path) -> Path:
    path = Path(os.fsdecode(os.path.join(os.fsencode(project), BAD)))
    path.write_text("a needle in here\n")
    (project / "sub").mkdir()
    os.symlink(os.fsencode(project / "sub") + b"/\xfe", os.fsencode(project / "link"))
    return path


def text_of(result: ToolResult) -> str:
    (part,) = result.content
    assert isinstance(part, TextPart)
    part.text.encode("utf-8")  # a lone surrogate would raise here
    return part.text


async def run(make_ctx: MakeCtx, env: LocalEnvironment, name: str, **args: Any) -> ToolResult:
    tools = {tool.name: tool for tool in workspace_tools(env.workspace)}
    ctx, _ = make_ctx(env)
    return await tools[name].handler(args, ctx)


def test_shown_escapes_only_what_is_not_utf8() -> None:
    assert shown("plain.txt") == "plain.txt"
    assert shown("caf\u00e9 \U0001f600.txt") == "caf\u00e9 \U0001f600.txt"
    assert shown(os.fsdecode(BAD)) == SHOWN
    assert shown("lone \ud800") == "lone \ufffd"  # not a byte a file system decode makes


async def test_list_dir_shows_the_name_escaped_and_the_link_target_too(
    make_ctx: MakeCtx, local_env: LocalEnvironment, bad_file: Path
) -> None:
    lines = text_of(await run(make_ctx, local_env, "list_dir")).splitlines()
    assert SHOWN in lines
    assert any(line.startswith("link -> ") and line.endswith("/sub/\\xfe") for line in lines)


async def test_glob_shows_the_name_escaped(
    make_ctx: MakeCtx, local_env: LocalEnvironment, bad_file: Path
) -> None:
    assert SHOWN in text_of(await run(make_ctx, local_env, "glob", pattern="*.txt")).splitlines()


@pytest.mark.parametrize("ripgrep", [False, True])
async def test_grep_finds_text_in_the_file_and_names_it_encodably(
    workspace: Workspace, bad_file: Path, ripgrep: bool
) -> None:
    if ripgrep and search.shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    found = await search.grep(workspace, "needle", ".", None, use_ripgrep=ripgrep)
    (line,) = found.lines
    line.encode("utf-8")
    assert line.endswith(":1:a needle in here")
    if not ripgrep:  # ripgrep prints raw bytes, which decode lossily to U+FFFD
        assert line.startswith(SHOWN)


async def test_read_file_takes_the_name_as_the_listing_showed_it(
    make_ctx: MakeCtx, local_env: LocalEnvironment, bad_file: Path, project: Path
) -> None:
    read = await run(make_ctx, local_env, "read_file", path=SHOWN)
    assert text_of(read) == "a needle in here\n"
    assert read.raw_output_json is not None
    assert json.loads(read.raw_output_json)["path"].endswith("/" + SHOWN)
    assert on_disk(SHOWN, str(project)) == os.fsdecode(BAD)
    assert on_disk("missing\\x41.txt", str(project)) == "missing\\x41.txt"
    literal = project / "lit\\x41.txt"
    literal.write_text("literal")
    (project / "litA.txt").write_text("other")
    assert on_disk("lit\\x41.txt", str(project)) == "lit\\x41.txt"  # the name as written wins
