"""`steerable-bridge run` works in its `--cwd`: workspace tools, asked for at the terminal.

A fresh process each time (the command as a person types it) on the demo model, whose
"write a file" asks for `write_file`. With a terminal (a pseudo-terminal here) the person is
asked and their answer decides; without one, `--approve` decides: `ask` refuses and names
`--approve all`, `all` writes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.commands.terminal import AtTerminal, detached

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(tmp / "state")}


def _run(tmp: Path, *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    argv = ["run", "--cwd", str(work), *args]
    if answer is None:
        return detached(argv, _env(tmp))
    person = AtTerminal.start(argv, _env(tmp))
    try:
        person.read_until("Allow")
        person.type(answer + "\n")
        code, out, err = person.finish()
    finally:
        person.close()
    return subprocess.CompletedProcess(argv, code, out, person.screen + err)


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
