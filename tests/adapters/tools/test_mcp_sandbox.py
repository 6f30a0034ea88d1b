"""A session's stdio MCP servers run in the command sandbox, with the network as configured.

Through `WorkspaceKit.start_mcp`, as ACP sessions mount them: a server (`mcp_server.py
--spy`) runs in a PID namespace of its own with the workspace writable, reaches a loopback
listener only when its network is allowed (the default for MCP servers; a server's
`network: False` cuts it), marks its tools `bwrap`, and under `--sandbox require` without
bubblewrap is not started at all (`sandbox_unavailable`). Unsandboxed (`--sandbox off`),
what a server left running in a session of its own dies when the server stops. Skipped
where bubblewrap cannot create a sandbox, except the refusal and the unsandboxed ones.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from steerable_bridge.adapters.tools import bwrap, pids_cgroup
from steerable_bridge.adapters.tools.confinement import CommandPolicy
from steerable_bridge.adapters.tools.kit import WorkspaceKit
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.values import TextPart
from tests.adapters.tools.test_mcp import SERVER

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def spy(name: str = "spy", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": (SERVER, "--spy"), **extra}


@asynccontextmanager
async def kit_for(project: Path, policy: CommandPolicy) -> AsyncIterator[WorkspaceKit]:
    async with anyio.create_task_group() as tg:

        def spawn(job: Any) -> None:
            tg.start_soon(job)

        kit = WorkspaceKit(str(project), (), spawn, policy=policy, start_timeout_s=20.0)
        try:
            yield kit
        finally:
            await kit.aclose()


def tool(kit: WorkspaceKit, name: str) -> Tool:
    return next(t for t in kit.tools() if t.name == name)


async def call(kit: WorkspaceKit, name: str, ctx_factory: Any, **args: Any) -> str:
    ctx, _ = ctx_factory(None)
    with anyio.fail_after(30):
        result = await tool(kit, name).handler(args, ctx)
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


@asynccontextmanager
async def listener() -> AsyncIterator[int]:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        await stream.aclose()

    server = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with server, anyio.create_task_group() as tg:
        tg.start_soon(server.serve, handle)
        yield server.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


@pytest.fixture
async def needs_bwrap() -> None:
    if not await bwrap.probe(bwrap.find_bwrap()):
        pytest.skip("bubblewrap cannot create a sandbox on this machine")


async def test_a_sandboxed_server_has_its_own_pids_the_workspace_and_network_as_configured(
    project: Path, make_ctx: Any, needs_bwrap: None
) -> None:
    policy = CommandPolicy(sandbox="require")
    async with listener() as port, kit_for(project, policy) as kit:
        problems = await kit.start_mcp([spy("open"), spy("closed", network=False)])
        assert problems == ()
        for name in ("open", "closed"):
            sandbox = tool(kit, f"mcp__{name}__whoami").sandbox
            assert sandbox is not None and await sandbox(None) == "bwrap"
        who = await call(kit, "mcp__open__whoami", make_ctx)
        assert who.startswith("pid ") and int(who.split()[1]) < 10  # a PID namespace
        assert who.endswith("writable True")
        assert await call(kit, "mcp__open__reach", make_ctx, port=port) == "connected"
        closed = await call(kit, "mcp__closed__reach", make_ctx, port=port)
        assert closed.startswith("unreachable")


async def test_mcp_net_deny_cuts_every_servers_network_unless_one_asks(
    project: Path, make_ctx: Any, needs_bwrap: None
) -> None:
    policy = CommandPolicy(sandbox="require", mcp_network=False)
    async with listener() as port, kit_for(project, policy) as kit:
        assert await kit.start_mcp([spy("default"), spy("asks", network=True)]) == ()
        denied = await call(kit, "mcp__default__reach", make_ctx, port=port)
        assert denied.startswith("unreachable")
        assert await call(kit, "mcp__asks__reach", make_ctx, port=port) == "connected"


async def test_require_without_bwrap_starts_no_server(project: Path) -> None:
    policy = CommandPolicy(sandbox="require", bwrap_path=str(project / "no-such-bwrap"))
    async with kit_for(project, policy) as kit:
        problems = await kit.start_mcp([spy()])
        assert len(problems) == 1
        assert problems[0].startswith("[sandbox_unavailable]") and "'spy'" in problems[0]
        assert "apt-get install bubblewrap) or pass --sandbox off" in problems[0]
        assert not [t for t in kit.tools() if t.name.startswith("mcp__")]


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize("holder", ["cgroup", "env-tag"])
async def test_an_unsandboxed_servers_setsid_child_dies_when_it_stops(
    project: Path, make_ctx: Any, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    if holder == "env-tag":
        monkeypatch.setattr(pids_cgroup, "_base", [None])
    elif not pids_cgroup.available():
        pytest.skip("no writable cgroup hierarchy here")
    pid = 0
    try:
        async with kit_for(project, CommandPolicy(sandbox="off")) as kit:
            assert await kit.start_mcp([spy()]) == ()
            sandbox = tool(kit, "mcp__spy__escape").sandbox
            assert sandbox is not None and await sandbox(None) == "none"
            pid = int(await call(kit, "mcp__spy__escape", make_ctx))
            assert live(pid) and os.getsid(pid) == pid
        with anyio.fail_after(10):
            while live(pid):  # noqa: ASYNC110 - the kernel's state is the event
                await anyio.sleep(0.02)
    finally:
        if pid and live(pid):
            os.kill(pid, signal.SIGKILL)
