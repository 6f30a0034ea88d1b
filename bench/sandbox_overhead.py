"""What the command sandbox costs: `run_command` wall time with bubblewrap against without.

Each sample runs one short command (`true` by default) through `LocalEnvironment.run`, as
the model's `run_command` does, alternating between `--sandbox off` and `--sandbox require`
so machine load hits both; the script prints the median and 95th percentile of each and
the difference of the medians. Run: `uv run python bench/sandbox_overhead.py [samples]
[command]` (30 samples by default). Needs `bwrap`; loopback and a temp folder only.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import anyio

from steerable_bridge.adapters.tools import bwrap
from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace


async def main(samples: int, command: str) -> None:
    if not await bwrap.probe(bwrap.find_bwrap()):
        sys.exit("bubblewrap cannot create a sandbox here; nothing to measure")
    with tempfile.TemporaryDirectory() as folder:
        workspace = Workspace.of(folder)
        envs = {
            mode: LocalEnvironment(workspace, policy=CommandPolicy(sandbox=mode))  # type: ignore[arg-type]
            for mode in ("off", "require")
        }
        times: dict[str, list[float]] = {"off": [], "require": []}
        for _ in range(samples):
            for mode, env in envs.items():
                start = time.perf_counter()
                result = await env.run(command, cwd=folder, timeout_s=30, output_limit=10_000)
                times[mode].append((time.perf_counter() - start) * 1000)
                assert result.exit_code == 0, result.output
    for mode, values in times.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
        print(f"sandbox {mode:8} median {statistics.median(values):6.1f} ms  p95 {p95:6.1f} ms")
    extra = statistics.median(times["require"]) - statistics.median(times["off"])
    print(f"bubblewrap adds {extra:.1f} ms per command (median, {samples} samples, {command!r})")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    anyio.run(main, count, sys.argv[2] if len(sys.argv) > 2 else "true")
