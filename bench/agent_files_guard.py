"""What refusing the agent's own files costs each path a workspace tool names.

Builds a project holding the agent's state as the worst case has it (the store and its
-wal beside `approvals.json` in the project, a spill tree of `--spill` files), registers
it as the composition root does, and prints the median time of `Workspace.resolve` for a
plain project file, a file not made yet, a hard-linked project file (which lists the
trees for the link's other name) and a refused store path — each against a workspace
that guards nothing.

    uv run python bench/agent_files_guard.py [--spill 2000] [--calls 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from steerable_bridge.adapters.tools.agent_files import AgentFiles
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import WorkspaceError


def timed(workspace: Workspace, path: str, calls: int) -> float:
    """Median microseconds per resolve over 5 rounds of `calls`."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            with contextlib.suppress(WorkspaceError):
                workspace.resolve(path)
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spill", type=int, default=2000, help="files in the spill tree")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "src").mkdir()
        (project / "src" / "app.py").write_text("x = 1\n")
        (project / "sessions.db").write_bytes(b"db")
        (project / "sessions.db-wal").write_bytes(b"wal")
        (project / "approvals.json").write_text("{}")
        spill = project / "state" / "spill" / "sess"
        spill.mkdir(parents=True)
        for index in range(args.spill):
            (spill / f"c{index}.txt").write_text("out")
        (project / "src" / "shared.py").write_text("y = 2\n")
        os.link(project / "src" / "shared.py", project / "src" / "linked.py")
        private = AgentFiles()
        private.keep_tree(str(project / "state"), "state folder")
        private.keep_file(str(project / "sessions.db"), "session store")
        private.keep_file(str(project / "approvals.json"), "approvals file")
        guarded = Workspace.of(str(project), private=private)
        plain = Workspace.of(str(project), private=AgentFiles())
        print(f"resolve, median µs per call ({args.calls} calls x 5, spill tree {args.spill})")
        for label, path in (
            ("project file", "src/app.py"),
            ("file not made yet", "src/new.py"),
            ("hard-linked project file", "src/linked.py"),
            ("the store (refused)", "sessions.db"),
        ):
            bare = timed(plain, path, args.calls)
            kept = timed(guarded, path, args.calls)
            print(f"  {label:26} unguarded {bare:8.1f}   guarded {kept:8.1f}")


if __name__ == "__main__":
    main()
