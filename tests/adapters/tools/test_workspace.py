"""The workspace tools: contract names, kinds, titles, locations, diffs, and their failures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.workspace import READ_MAX_LINES, workspace_tools
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.permissions import (
    ModePolicy,
    PermissionAnswer,
    PermissionRequest,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolFailure, ToolResult
from steerable_bridge.runtime.values import DiffContent, Location, TextPart
from tests.runtime.harness import make_agent, of, prompt, scripted

pytestmark = pytest.mark.anyio

MakeCtx = Callable[..., Any]


@pytest.fixture
def tools(workspace: Workspace) -> dict[str, Tool]:
    return {tool.name: tool for tool in workspace_tools(workspace)}


async def call(
    tools: dict[str, Tool], make_ctx: MakeCtx, env: Any, name: str, **args: Any
) -> ToolResult:
    ctx, _ = make_ctx(env)
    return await tools[name].handler(args, ctx)


async def failure(
    tools: dict[str, Tool], make_ctx: MakeCtx, env: Any, name: str, **args: Any
) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await call(tools, make_ctx, env, name, **args)
    return info.value


def text_of(result: ToolResult) -> str:
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


def test_names_kinds_and_permissions_follow_the_contract(tools: dict[str, Tool]) -> None:
    kinds = {name: tool.kind for name, tool in tools.items()}
    assert kinds == {
        "read_file": "read",
        "write_file": "edit",
        "edit_file": "edit",
        "list_dir": "search",
        "glob": "search",
        "grep": "search",
        "run_command": "execute",
        "update_plan": "think",
    }
    asking = {name for name, tool in tools.items() if tool.needs_permission}
    assert asking == {"write_file", "edit_file", "run_command"}
    params = {name: set(tool.parameters.get("properties", {})) for name, tool in tools.items()}
    assert params["read_file"] == {"path", "line", "limit"}
    assert params["edit_file"] == {"path", "old_text", "new_text", "replace_all"}
    assert params["grep"] == {"pattern", "path", "glob"}
    assert params["run_command"] == {"command", "cwd", "timeout_ms"}


def test_titles_and_locations_are_human_and_absolute(tools: dict[str, Tool], project: Path) -> None:
    app = str(project / "src" / "app.py")
    assert tools["read_file"].describe({"path": "src/app.py"}) == (
        "Read src/app.py",
        (Location(path=app, line=1),),
    )
    assert tools["read_file"].describe({"path": app, "line": 40}) == (
        "Read src/app.py (from line 40)",
        (Location(path=app, line=40),),
    )
    assert (
        tools["edit_file"].describe({"path": "src/app.py", "old_text": "a", "new_text": "b"})[0]
        == "Edit src/app.py"
    )
    assert tools["run_command"].describe({"command": "pytest -q"})[0] == "Run pytest -q"
    assert tools["grep"].describe({"pattern": "TODO", "path": "src"})[0] == "Search 'TODO' in src"
    assert tools["read_file"].describe({"path": "../../etc/passwd"})[1] == ()


async def test_read_file_reads_parts_and_marks_truncation(
    tools: dict[str, Tool], make_ctx: MakeCtx, local_env: LocalEnvironment, project: Path
) -> None:
    result = await call(tools, make_ctx, local_env, "read_file", path="src/app.py")
    assert text_of(result) == "def main():\n    return 1\n"
    part = await call(tools, make_ctx, local_env, "read_file", path="src/app.py", line=2, limit=1)
    past = await call(tools, make_ctx, local_env, "read_file", path="src/app.py", line=9)
    assert text_of(past) == "[the file has fewer than 9 lines]"
    assert text_of(part) == "    return 1\n"
    (project / "long.txt").write_text("".join(f"{i}\n" for i in range(1, READ_MAX_LINES + 11)))
    long = text_of(await call(tools, make_ctx, local_env, "read_file", path="long.txt"))
    assert long.startswith("1\n2\n")
    assert f"line={READ_MAX_LINES + 1}" in long
    assert f"{READ_MAX_LINES + 1}\n" not in long.split("[truncated")[0]
    (project / "min.js").write_text("x" * 300_000 + "\nsecond\n")
    huge = text_of(await call(tools, make_ctx, local_env, "read_file", path="min.js"))
    assert huge.startswith("x" * 1000) and "only the first" in huge and "line=2" in huge


async def test_read_file_refuses_binary_outside_and_missing(
    tools: dict[str, Tool],
    make_ctx: MakeCtx,
    local_env: LocalEnvironment,
    project: Path,
    outside: Path,
) -> None:
    (project / "img.bin").write_bytes(bytes(range(256)))
    assert (await failure(tools, make_ctx, local_env, "read_file", path="img.bin")).code == (
        "binary_file"
    )
    escaped = await failure(
        tools, make_ctx, local_env, "read_file", path=str(outside / "secret.txt")
    )
    assert escaped.code == "outside_workspace"
    assert (await failure(tools, make_ctx, local_env, "read_file", path="nope.txt")).code == (
        "not_found"
    )
    missing_env = await failure(tools, make_ctx, None, "read_file", path="src/app.py")
    assert missing_env.code == "no_workspace" and "--workspace" in missing_env.message


async def test_write_file_reports_a_diff_for_new_and_existing_files(
    tools: dict[str, Tool], make_ctx: MakeCtx, local_env: LocalEnvironment, project: Path
) -> None:
    created = await call(tools, make_ctx, local_env, "write_file", path="docs/a.md", content="A\n")
    assert created.content[0] == DiffContent(
        path=str(project / "docs" / "a.md"), old_text=None, new_text="A\n"
    )
    replaced = await call(tools, make_ctx, local_env, "write_file", path="docs/a.md", content="B\n")
    assert replaced.content[0] == DiffContent(
        path=str(project / "docs" / "a.md"), old_text="A\n", new_text="B\n"
    )
    assert (project / "docs" / "a.md").read_text() == "B\n"


async def test_edit_file_needs_exactly_one_match_unless_replace_all(
    tools: dict[str, Tool], make_ctx: MakeCtx, local_env: LocalEnvironment, project: Path
) -> None:
    target = project / "src" / "dup.py"
    target.write_text("x = 1\ny = 1\nz = 2\n")
    none = await failure(
        tools, make_ctx, local_env, "edit_file", path="src/dup.py", old_text="w = 9", new_text="q"
    )
    assert none.code == "no_match" and "read the file again" in none.message
    many = await failure(
        tools, make_ctx, local_env, "edit_file", path="src/dup.py", old_text="= 1", new_text="= 5"
    )
    assert many.code == "ambiguous_match" and "2 times" in many.message
    assert target.read_text() == "x = 1\ny = 1\nz = 2\n"
    once = await call(
        tools,
        make_ctx,
        local_env,
        "edit_file",
        path="src/dup.py",
        old_text="z = 2",
        new_text="z = 3",
    )
    assert once.content[0] == DiffContent(
        path=str(target), old_text="x = 1\ny = 1\nz = 2\n", new_text="x = 1\ny = 1\nz = 3\n"
    )
    every = await call(
        tools,
        make_ctx,
        local_env,
        "edit_file",
        path="src/dup.py",
        old_text="= 1",
        new_text="= 7",
        replace_all=True,
    )
    assert target.read_text() == "x = 7\ny = 7\nz = 3\n"
    assert "2 occurrences" in text_of(every)


async def test_run_command_reports_exit_codes_and_timeouts(
    tools: dict[str, Tool], make_ctx: MakeCtx, local_env: LocalEnvironment, outside: Path
) -> None:
    ok = await call(tools, make_ctx, local_env, "run_command", command="echo hi", cwd="src")
    assert ok.error is None and text_of(ok) == "hi\n[exit code 0]"
    bad = await call(tools, make_ctx, local_env, "run_command", command="exit 4")
    assert bad.error is not None and bad.error.code == "command_failed"
    slow = await call(tools, make_ctx, local_env, "run_command", command="sleep 20", timeout_ms=200)
    assert slow.error is not None and slow.error.code == "command_timeout"
    refused = await failure(
        tools, make_ctx, local_env, "run_command", command="ls", cwd=str(outside)
    )
    assert refused.code == "outside_workspace"


async def test_listing_tools_work_through_the_context(
    tools: dict[str, Tool], make_ctx: MakeCtx, local_env: LocalEnvironment
) -> None:
    listed = await call(tools, make_ctx, local_env, "list_dir")
    assert text_of(listed).splitlines() == ["README.md", "src/"]
    globbed = await call(tools, make_ctx, local_env, "glob", pattern="**/*.py")
    assert text_of(globbed) == "src/app.py"
    grepped = await call(tools, make_ctx, local_env, "grep", pattern="hello", glob="*.md")
    assert text_of(grepped) == "README.md:2:hello world"


async def test_read_only_mode_never_writes_and_default_mode_asks_first(
    workspace: Workspace, project: Path
) -> None:
    """Through the real loop: edits and commands run only after an allow."""
    args = {"path": "src/app.py", "content": "changed\n"}
    model = scripted(
        {
            "tool_calls": [
                {"id": "r", "name": "read_file", "arguments": {"path": "src/app.py"}},
                {"id": "w", "name": "write_file", "arguments": args},
                {"id": "x", "name": "run_command", "arguments": {"command": "touch ran"}},
            ]
        },
        {"text": "done"},
        loop=True,
    )
    agent = make_agent(model, tools=workspace_tools(workspace), approval="ask")
    session = await agent.new_session(str(project))
    session.environment = LocalEnvironment(workspace)
    asked: list[str] = []

    async def reject(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.name)
        return PermissionAnswer(outcome="reject_once", option_id="reject_once")

    mode = ["read-only"]
    session.policy = ModePolicy(lambda: mode[0], reject)
    _, events = await prompt(session)
    finished = {e.call_id: e for e in of(events, ev.ToolFinished)}
    assert finished["r"].status == "completed"
    assert finished["w"].error is not None and finished["w"].error.code == "permission_denied"
    assert finished["x"].error is not None and finished["x"].error.code == "permission_denied"
    assert asked == []
    mode[0] = "default"
    _, events = await prompt(session)
    assert asked == ["write_file", "run_command"]
    assert (project / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    assert not (project / "ran").exists()
    ends = {e.call_id: e for e in of(events, ev.ToolCallEnd)}
    assert ends["w"].tool_kind == "edit" and ends["w"].title == "Write src/app.py"
    assert ends["x"].tool_kind == "execute"
