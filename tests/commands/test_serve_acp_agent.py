"""`serve --acp-agent` options: a bad command line is one line with the remedy (exit 2), and
the bridged agent's route is named after the agent, not its launcher."""

from __future__ import annotations

import subprocess
import sys

import pytest

from steerable_bridge.commands.serve import agent_name
from tests.commands.serve_child import clean_env

COMMAND = [sys.executable, "-m", "steerable_bridge.cli", "serve", "--storage", "memory"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "--acp-agent needs a command line"),
        ("no-such-agent-xyz --acp", "'no-such-agent-xyz' is not a program on PATH"),
        ("'unclosed", "is not a valid command line"),
    ],
)
def test_a_bad_agent_command_line_exits_2_naming_the_remedy(line: str, message: str) -> None:
    done = subprocess.run(
        [*COMMAND, "--port", "0", "--acp-agent", line],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""  # never bound


def test_several_workers_are_refused_for_a_bridged_agent() -> None:
    done = subprocess.run(
        [*COMMAND, "--port", "0", "--workers", "2", "--acp-agent", "true"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--workers 1" in done.stderr


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["codex-acp"], "codex-acp"),
        (["/usr/local/bin/claude-agent-acp", "--debug"], "claude-agent-acp"),
        (["npx", "-y", "@zed-industries/claude-agent-acp@0.5"], "claude-agent-acp"),
        (["python3", "-m", "steerable_bridge", "acp"], "steerable_bridge"),
        (["uvx", "fast-agent-mcp@0.3", "go"], "fast-agent-mcp"),
    ],
)
def test_the_route_names_the_agent_not_its_launcher(argv: list[str], name: str) -> None:
    assert agent_name(argv) == name
