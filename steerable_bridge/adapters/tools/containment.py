"""What holds all of one command's processes, so that all of them can be killed.

A command's process group is not enough: a child that calls `setsid`, or a daemon that
double-forks, leaves it. `Containment.open(pids_max)` gives a command a cgroup of its own
when this process may create one (`pids_cgroup.py`; bounded to `pids_max` processes where
the hierarchy counts them), else a tag in its environment (`env_tag.py`).
`argv(program)` and `environ(env)` put the command in it; `kill()` SIGKILLs everything in
it (the command's end, its timeout, its cancellation) and `close()` kills and removes it.
`cgroup` and `tag` are what `deathwatch.py`'s companion kills when this process dies.
Inside bubblewrap the sandbox's PID namespace holds the command as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import anyio

from steerable_bridge.adapters.tools import env_tag, pids_cgroup

__all__ = ["Containment"]


@dataclass(frozen=True, slots=True)
class Containment:
    """A command's cgroup folder, or else its environment tag (see the module docstring)."""

    cgroup: str | None
    tag: str | None

    @classmethod
    def open(cls, pids_max: int | None = None) -> Containment:
        cgroup = pids_cgroup.open_cgroup(pids_max)
        return cls(cgroup, None if cgroup is not None else env_tag.tag())

    def argv(self, program: list[str]) -> list[str]:
        """`program`, joining the cgroup before it starts anything."""
        return program if self.cgroup is None else pids_cgroup.enter_argv(self.cgroup, program)

    def environ(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        """The command's environment (None: this process's), tagged when there is no cgroup."""
        if self.tag is None:
            return None if env is None else dict(env)
        return {**(os.environ if env is None else env), env_tag.NAME: self.tag}

    async def kill(self) -> None:
        """SIGKILL every process in it and wait (bounded) until they are gone."""
        with anyio.CancelScope(shield=True):
            if self.cgroup is not None:
                await pids_cgroup.kill_cgroup(self.cgroup)
            elif self.tag is not None:
                await env_tag.kill_tagged(self.tag)

    async def close(self) -> None:
        """`kill`, then remove the cgroup."""
        await self.kill()
        if self.cgroup is not None:
            with anyio.CancelScope(shield=True):
                await pids_cgroup.remove_cgroup(self.cgroup)
