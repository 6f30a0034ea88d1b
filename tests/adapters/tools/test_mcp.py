"""MCP servers: a real stdio server mounted, its tools callable, failures reported, no leaks."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools.mcp import McpServerConfig, mcp_tool_name, open_mcp_servers
from steerable_bridge.runtime.ports.tools import ToolContext, ToolFailure
from steerable_bridge.runtime.values import TextPart
from tests.adapters.tools.conftest import live_group_members, members_after_kill

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def notes(*extra: str, name: str = "notes") -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=(SERVER, *extra))


def test_tool_names_are_prefixed_and_sanitised() -> None:
    assert mcp_tool_name("notes", "add_note") == "mcp__notes__add_note"
    assert mcp_tool_name("my server.v2", "do it") == "mcp__my_server_v2__do_it"
    long_a = mcp_tool_name("a-very-long-server-name-indeed", "and_a_very_long_tool_name_as_well_1")
    long_b = mcp_tool_name("a-very-long-server-name-indeed", "and_a_very_long_tool_name_as_well_2")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


async def test_a_stdio_server_is_mounted_and_its_tools_run(make_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx: ToolContext = make_ctx(None)[0]
    with anyio.fail_after(30):
        async with open_mcp_servers([notes()]) as (servers, problems):
            assert problems == ()
            tools = {tool.name: tool for tool in servers.tools()}
            assert set(tools) == {
                "mcp__notes__add_note",
                "mcp__notes__word_count",
                "mcp__notes__explode",
            }
            add, count = tools["mcp__notes__add_note"], tools["mcp__notes__word_count"]
            assert add.kind == "other" and add.needs_permission
            assert count.kind == "read" and not count.needs_permission
            assert add.describe({"text": "x"})[0] == "add_note (notes)"
            first = await add.handler({"text": "buy milk"}, ctx)
            second = await add.handler({"text": "call mom"}, ctx)
            assert first.content == (TextPart(text="1 notes"),) and first.error is None
            assert second.content == (TextPart(text="2 notes"),)
            counted = await count.handler({"text": "one two three"}, ctx)
            assert counted.content == (TextPart(text="3"),)
            failed = await tools["mcp__notes__explode"].handler({}, ctx)
            assert failed.error is not None and failed.error.code == "mcp_tool_error"
            assert "explode" in failed.error.message
        with pytest.raises(ToolFailure) as info:
            await add.handler({"text": "late"}, ctx)
        assert info.value.code == "mcp_server_gone"


async def test_failing_servers_are_reported_and_the_good_one_still_works(make_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx: ToolContext = make_ctx(None)[0]
    configs = [
        notes("--crash", name="crashy"),
        McpServerConfig(name="missing", command="/nonexistent/mcp-server"),
        notes("--slow", name="sleepy"),
        notes(),
    ]
    # The start bound must leave a real server room to import the MCP SDK on a loaded
    # machine (3 s did not, with other test processes running); `sleepy` never answers.
    with anyio.fail_after(40):
        async with open_mcp_servers(configs, start_timeout_s=10.0) as (servers, problems):
            by_server = {problem.server: problem for problem in problems}
            assert set(by_server) == {"crashy", "missing", "sleepy"}
            assert by_server["crashy"].code == "mcp_start_failed"
            assert "boom: this server refuses to start" in by_server["crashy"].message
            assert by_server["missing"].code == "mcp_start_failed"
            assert by_server["sleepy"].code == "mcp_start_timeout"
            names = {tool.name for tool in servers.tools()}
            assert names == {
                "mcp__notes__add_note",
                "mcp__notes__word_count",
                "mcp__notes__explode",
            }
            tool = next(t for t in servers.tools() if t.name == "mcp__notes__add_note")
            result = await tool.handler({"text": "still works"}, ctx)
            assert result.content == (TextPart(text="1 notes"),)


async def test_closing_stops_the_server_process(tmp_path: Path) -> None:
    script = tmp_path / "pid_server.py"
    script.write_text(
        "import os, runpy, sys\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpgrp()))\n"
        f"sys.argv = [{SERVER!r}]\n"
        f"runpy.run_path({SERVER!r}, run_name='__main__')\n"
    )
    config = McpServerConfig(name="notes", command=sys.executable, args=(str(script),))
    with anyio.fail_after(30):
        async with open_mcp_servers([config]) as (servers, problems):
            assert problems == () and servers.tools()
            pgid = int((tmp_path / "pid").read_text())
            assert live_group_members(pgid)
    assert await members_after_kill(pgid) == []


async def test_a_long_tool_list_is_capped_with_a_note() -> None:
    with anyio.fail_after(30):
        async with open_mcp_servers([notes("--many", name="big")]) as (servers, problems):
            names = [tool.name for tool in servers.tools()]
    assert len(names) == 64
    assert "mcp__big__add_note" in names and "mcp__big__huge_schema" not in names
    assert "mcp__big__extra_60" in names and "mcp__big__extra_61" not in names
    (problem,) = problems
    assert problem.code == "mcp_tools_capped"
    assert "lists 74 tools; 64 are offered" in problem.message
    assert "9 beyond the first 64" in problem.message
    assert "1 with an input schema over 16384 bytes (huge_schema)" in problem.message


def test_cap_tools_bounds_names_schemas_and_descriptions() -> None:
    import mcp_types

    from steerable_bridge.adapters.tools.mcp_limits import McpLimits, cap_tools

    def tool(name: str, schema_size: int = 0, description: str = "d") -> mcp_types.Tool:
        schema = {"type": "object", "description": "x" * schema_size}
        return mcp_types.Tool(name=name, input_schema=schema, description=description)

    limits = McpLimits(
        max_tools=2, max_name_chars=10, max_schema_bytes=200, max_description_chars=20
    )
    kept, note = cap_tools(
        "s",
        [tool("a", description="y" * 50), tool("b" * 11), tool("c", 500), tool("d"), tool("e")],
        limits,
    )
    assert [t.name for t in kept] == ["a", "d"]
    assert kept[0].description is not None and len(kept[0].description) == 20
    assert note is not None and "lists 5 tools; 2 are offered" in note
    assert "1 beyond the first 2 (e)" in note and "name over 10 characters" in note
    assert cap_tools("s", [tool("a")], limits) == ((tool("a"),), None)


async def test_an_answer_with_a_lone_surrogate_ends_the_call_at_once_and_the_server_serves_on(
    make_ctx,  # type: ignore[no-untyped-def]
) -> None:
    # The SDK's parser refuses a lone UTF-16 surrogate escape and drops the message (and
    # the answer in it); the call must end now, not at its timeout, and the server go on.
    ctx: ToolContext = make_ctx(None)[0]
    with anyio.fail_after(30):
        config = notes("--broken-text")
        async with open_mcp_servers([config], call_timeout_s=60.0) as (servers, problems):
            assert problems == ()
            tools = {tool.name: tool for tool in servers.tools()}
            with anyio.fail_after(10), pytest.raises(ToolFailure) as info:
                await tools["mcp__notes__broken_text"].handler({}, ctx)
            assert info.value.code == "mcp_unreadable_answer"
            assert "surrogate" in info.value.message and "fix the server" in info.value.message
            counted = await tools["mcp__notes__word_count"].handler({"text": "a b c"}, ctx)
            assert counted.content == (TextPart(text="3"),)
