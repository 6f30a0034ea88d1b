"""Workspace tools: what grep, commands and MCP servers cost on this machine.

Prints, for the package source (or `--root`): grep through ripgrep and through the
Python fallback (median of `--repeat` runs, and the match counts, which must agree); the
overhead of `run_command` for a trivial command (`true`) and how long a timed-out command
with a background child takes to be stopped with its whole process group; and the time
from starting a stdio MCP server (the tests' tiny SDK server) to having its tools listed.

    uv run python bench/workspace_tools.py [--root steerable_bridge] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from steerable_bridge.adapters.tools import search
from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.mcp import McpServerConfig, open_mcp_servers
from steerable_bridge.adapters.tools.paths import Workspace

MCP_SERVER = (
    Path(__file__).resolve().parent.parent / "tests" / "adapters" / "tools" / "mcp_server.py"
)


async def timed(repeat: int, work: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    times: list[float] = []
    result: object = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = await work()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


async def main(root: str, repeat: int) -> None:
    workspace = Workspace.of(root)
    env = LocalEnvironment(workspace)
    pattern = r"def __init__\("
    if shutil.which("rg"):
        took, found = await timed(
            repeat, lambda: search.grep(workspace, pattern, ".", "*.py", use_ripgrep=True)
        )
        print(f"grep (ripgrep)          {took * 1000:8.1f} ms  {len(found.lines)} matches")  # type: ignore[attr-defined]
    else:
        print("grep (ripgrep)          not installed")
    took, found = await timed(
        repeat, lambda: search.grep(workspace, pattern, ".", "*.py", use_ripgrep=False)
    )
    print(f"grep (python fallback)  {took * 1000:8.1f} ms  {len(found.lines)} matches")  # type: ignore[attr-defined]
    took, _ = await timed(
        repeat, lambda: env.run("true", cwd=workspace.cwd, timeout_s=10, output_limit=1000)
    )
    print(f"run_command 'true'      {took * 1000:8.1f} ms")
    took, _ = await timed(
        1,
        lambda: env.run("sleep 30 & sleep 30", cwd=workspace.cwd, timeout_s=0.2, output_limit=1000),
    )
    print(f"timeout 0.2 s → group stopped after {took * 1000:8.1f} ms")
    config = McpServerConfig(name="notes", command=sys.executable, args=(str(MCP_SERVER),))
    start = time.perf_counter()
    async with open_mcp_servers([config]) as (servers, problems):
        listed = time.perf_counter() - start
        assert not problems, problems
        count = len(servers.tools())
        stop = time.perf_counter()
    stopped = time.perf_counter() - stop
    print(
        f"MCP stdio server        {listed * 1000:8.1f} ms to {count} tools listed,"
        f" {stopped * 1000:.1f} ms to stop"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="steerable_bridge")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    anyio.run(main, os.path.abspath(options.root), options.repeat)
