"""Fixtures for the workspace tool tests: a project folder, an outside folder, a tool context."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.tools import ToolContext
from steerable_bridge.runtime.values import PlanEntry, ToolContent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "README.md").write_text("# Demo\nhello world\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    other.mkdir()
    (other / "secret.txt").write_text("TOP SECRET\n")
    return other


@pytest.fixture
def workspace(project: Path) -> Workspace:
    return Workspace.of(str(project))


@pytest.fixture
def local_env(workspace: Workspace) -> LocalEnvironment:
    """Unsandboxed, so the tests see host pids; test_sandbox.py covers bwrap."""
    return LocalEnvironment(workspace, policy=CommandPolicy(sandbox="off"))


class Recorder:
    """Collects what a tool streams through its context."""

    def __init__(self) -> None:
        self.outputs: list[tuple[ToolContent, ...]] = []
        self.plans: list[tuple[PlanEntry, ...]] = []

    async def output(self, content: tuple[ToolContent, ...]) -> None:
        self.outputs.append(content)

    async def plan(self, entries: tuple[PlanEntry, ...]) -> None:
        self.plans.append(entries)


@pytest.fixture
def make_ctx(project: Path) -> Callable[..., tuple[ToolContext, Recorder]]:
    def make(
        environment: Environment | None, cwd: str | None = None
    ) -> tuple[ToolContext, Recorder]:
        recorder = Recorder()

        async def patch(_: Any) -> None:
            raise AssertionError("workspace tools never patch state")

        ctx = ToolContext(
            session_id="sess_test",
            run_id="run_test",
            call_id="call_test",
            cwd=cwd or str(project),
            environment=environment,
            output=recorder.output,
            update_plan=recorder.plan,
            patch_state=patch,
            state=lambda: None,
        )
        return ctx, recorder

    return make


def live_group_members(pgid: int) -> list[int]:
    """Pids of processes in group `pgid` that are not zombies (scans /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(entry))
    return members


async def members_after_kill(pgid: int, within_s: float = 10.0) -> list[int]:
    """The members of group `pgid` still alive once a kill has had `within_s` to land.

    A SIGKILL takes effect when the kernel next schedules each process, which on a loaded
    machine is not at once: poll the kernel's state (the event itself) until the group is
    empty or the bound passes, then return what is left.
    """
    with anyio.move_on_after(within_s):
        while live_group_members(pgid):  # noqa: ASYNC110 - the kernel's state is the event
            await anyio.sleep(0.01)
    return live_group_members(pgid)
