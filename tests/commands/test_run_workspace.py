"""`steerable-bridge run` works in its `--cwd`: workspace tools, asked for at the terminal.

A fresh process each time (the command as a person types it) on the demo model, whose
"write a file" asks for `write_file`. With a terminal (a pseudo-terminal here) the person is
asked and their answer decides; without one, `--approve` decides: `ask` refuses and names
`--approve all`, `all` writes.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(tmp / "state")}


def _run(tmp: Path, *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "steerable_bridge.cli", "run", "--cwd", str(work), *args]
    if answer is None:
        return subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            env=_env(tmp), timeout=30, check=False,
        )  # fmt: skip
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode() + b"\n")  # typed ahead; read when asked
        return subprocess.run(
            command, stdin=follower, capture_output=True, text=True,
            env=_env(tmp), timeout=30, check=False,
        )  # fmt: skip
    finally:
        os.close(leader)
        os.close(follower)


def test_a_person_at_the_terminal_is_asked_and_yes_writes_the_file(tmp_path: Path) -> None:
    done = _run(tmp_path, "write a file", answer="y")
    assert done.returncode == 0, done.stderr
    assert "Allow" in done.stdout + done.stderr
    assert (tmp_path / "work" / "demo-note.txt").is_file()


def test_no_at_the_terminal_refuses(tmp_path: Path) -> None:
    done = _run(tmp_path, "write a file", answer="n")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work" / "demo-note.txt").exists()


def test_without_a_terminal_approve_decides(tmp_path: Path) -> None:
    refused = _run(tmp_path, "write a file")
    assert "pass --approve all" in refused.stderr
    assert not (tmp_path / "work" / "demo-note.txt").exists()
    allowed = _run(tmp_path, "--approve", "all", "write a file")
    assert allowed.returncode == 0, allowed.stderr
    assert (tmp_path / "work" / "demo-note.txt").is_file()


def test_no_workspace_offers_no_workspace_tools(tmp_path: Path) -> None:
    done = _run(tmp_path, "--no-workspace", "--approve", "all", "write a file")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work" / "demo-note.txt").exists()
