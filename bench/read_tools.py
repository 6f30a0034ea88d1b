"""The read-only tools on hostile files: a FIFO, a huge one-line file, a runaway regex.

Builds a workspace in a temp folder with a FIFO nobody writes to, a `--size-mb` file that is
one line, and a line of 100,000 'a's ending in 'b'; then runs each case in a fresh child
process (so each peak RSS is its own) through the same code the tools use
(`LocalEnvironment.read_text`, `search.grep` with ripgrep and with the RE2 fallback) and
prints, per case, the wall time, how the call ended (the result's size, or the error code)
and the child's peak RSS above its RSS before the call. For scale it also times Python's
`re` (what the fallback used before) on `(a+)+$` over short runs of 'a' + 'b', where each
extra 'a' doubles the time. Every case is bounded (`--timeout`, the FIFO cases too).
`--src DIR` runs the cases from another checkout (PYTHONPATH), to compare builds.
Run: `uv run python bench/read_tools.py [--size-mb 200] [--timeout 60]`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "read_file FIFO": ("read", {"path": "pipe"}),
    "read_file huge line, line=1 limit=5": ("read", {"path": "one.txt", "line": 1, "limit": 5}),
    "read_file huge line, whole": ("read", {"path": "one.txt"}),
    "grep FIFO (ripgrep)": ("grep", {"pattern": "x", "path": "pipe", "rg": True}),
    "grep FIFO (RE2 fallback)": ("grep", {"pattern": "x", "path": "pipe", "rg": False}),
    "grep (a+)+$ (ripgrep)": ("grep", {"pattern": "(a+)+$", "path": "evil.txt", "rg": True}),
    "grep (a+)+$ (RE2 fallback)": ("grep", {"pattern": "(a+)+$", "path": "evil.txt", "rg": False}),
    "grep huge line (RE2 fallback)": ("grep", {"pattern": "y", "path": "one.txt", "rg": False}),
}


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def one(folder: str, name: str) -> None:
    """Child: run one case and print `seconds|outcome|peak MB above the start`."""
    import anyio

    from steerable_bridge.adapters.tools import search
    from steerable_bridge.adapters.tools.local_env import LocalEnvironment
    from steerable_bridge.adapters.tools.paths import Workspace
    from steerable_bridge.runtime.ports.environment import WorkspaceError

    workspace = Workspace.of(folder)
    env = LocalEnvironment(workspace)
    kind, args = CASES[name]

    async def call() -> str:
        if kind == "read":
            text = await env.read_text(
                workspace.resolve(str(args["path"])),
                line=args.get("line"),  # type: ignore[arg-type]
                limit=args.get("limit"),  # type: ignore[arg-type]
            )
            return f"{len(text)} characters"
        found = await search.grep(
            workspace, str(args["pattern"]), str(args["path"]), None, use_ripgrep=bool(args["rg"])
        )
        return f"{len(found.lines)} matches"

    async def main() -> str:
        try:
            return await call()
        except WorkspaceError as err:
            return f"refused: {err.code}"

    before = status_kb("VmRSS")
    started = time.perf_counter()
    outcome = anyio.run(main)
    took = time.perf_counter() - started
    print(f"{took:.3f}|{outcome}|{(status_kb('VmHWM') - before) / 1024:.1f}")


def python_re_seconds(count: int) -> float:
    pattern = re.compile(r"(a+)+$")
    started = time.perf_counter()
    pattern.search("a" * count + "b")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200, help="the one-line file (200)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per case, seconds (60)")
    parser.add_argument("--src", default="", help="run the cases from another checkout")
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(*args.one)
        return
    with tempfile.TemporaryDirectory() as folder:
        os.mkfifo(Path(folder) / "pipe")
        with (Path(folder) / "one.txt").open("w") as handle:
            block = "x" * (1024 * 1024)
            for _ in range(args.size_mb):
                handle.write(block)
            handle.write("\n")
        (Path(folder) / "evil.txt").write_text("a" * 100_000 + "b\n")
        print(f"{'case':42} {'seconds':>8}  {'peak RSS +MB':>12}  outcome")
        for name in CASES:
            try:
                done = subprocess.run(
                    [sys.executable, __file__, "--one", folder, name],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONPATH": args.src} if args.src else None,
                    timeout=args.timeout,
                    check=False,
                )
                took, outcome, peak = done.stdout.strip().split("|")
            except subprocess.TimeoutExpired:
                took, outcome, peak = f">{args.timeout:g}", "timed out", "?"
            except ValueError:
                took, outcome, peak = "?", f"failed: {done.stderr.strip()[-200:]}", "?"
            print(f"{name:42} {took:>8}  {peak:>12}  {outcome}")
    for count in (18, 20, 22, 24):
        print(f"Python re, (a+)+$ over {count} 'a' + 'b': {python_re_seconds(count):.3f} s")


if __name__ == "__main__":
    main()
