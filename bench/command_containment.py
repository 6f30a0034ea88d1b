"""What holding a command's processes costs: `run_command` wall time per containment.

Each sample runs one short command (`true` by default) through `LocalEnvironment.run` with
`--sandbox off`, once per holder, alternating so machine load hits all: the process group
alone (what ran before: a `setsid` child escapes it), the environment tag (the fallback
without cgroups: a `/proc` scan at the end), a cgroup v1 `pids` group and a cgroup v2 group
(`cgroup.kill`) where this machine lets us make them. Prints the median and 95th
percentile of each. Run: `uv run python bench/command_containment.py [samples] [command]`
(40 samples by default); temp folder only.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import anyio

from steerable_bridge.adapters.tools import pids_cgroup
from steerable_bridge.adapters.tools.containment import Containment
from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace

ORIGINAL_OPEN = Containment.open


def holders() -> dict[str, Callable[[], None]]:
    """Name → a function that makes the next commands use that holder."""

    def base(folder: str | None) -> Callable[[], None]:
        def use() -> None:
            pids_cgroup._base[:] = [folder]
            Containment.open = ORIGINAL_OPEN  # type: ignore[method-assign]

        return use

    def group_only() -> None:
        Containment.open = classmethod(lambda cls, pids_max=None: cls(None, None))  # type: ignore[assignment, method-assign]

    found: dict[str, Callable[[], None]] = {"group only": group_only, "env tag": base(None)}
    if os.access("/sys/fs/cgroup/pids", os.W_OK):
        found["cgroup v1"] = base("/sys/fs/cgroup/pids")
    if os.access("/sys/fs/cgroup/unified/cgroup.procs", os.W_OK):
        found["cgroup v2"] = base("/sys/fs/cgroup/unified")
    return found


async def main(samples: int, command: str) -> None:
    pids_cgroup._base[:] = [None]
    choices = holders()
    times: dict[str, list[float]] = {name: [] for name in choices}
    with tempfile.TemporaryDirectory() as folder:
        env = LocalEnvironment(Workspace.of(folder), policy=CommandPolicy(sandbox="off"))
        for _ in range(samples):
            for name, use in choices.items():
                use()
                start = time.perf_counter()
                result = await env.run(command, cwd=folder, timeout_s=30, output_limit=10_000)
                times[name].append((time.perf_counter() - start) * 1000)
                assert result.exit_code == 0, result.output
    processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
    for name, values in times.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
        print(f"{name:10} median {statistics.median(values):6.1f} ms  p95 {p95:6.1f} ms")
    print(f"({samples} samples of {command!r}, {processes} processes on the machine)")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    anyio.run(main, count, sys.argv[2] if len(sys.argv) > 2 else "true")
