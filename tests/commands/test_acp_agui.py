"""`steerable-bridge acp --agui-url`: option mistakes exit 2 with one line naming the remedy,
before anything is answered on stdout; the README's editor snippets parse as that command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _acp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "acp", "--storage", "memory", *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--agui-url", "ftp://example.com/agent"], "is not an http(s) URL"),
        (["--agui-url", "http://127.0.0.1:9/agent", "--agui-header", "NoColon"], "Name: value"),
        (["--agui-url", "http://127.0.0.1:9/agent", "--agui-timeout", "0"], "positive"),
    ],
)
def test_a_bad_bridge_option_is_a_one_line_error(args: list[str], words: str) -> None:
    done = _acp(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert words in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_tools_modules_do_not_apply_to_a_bridged_endpoint(tmp_path: Path) -> None:
    tools = tmp_path / "tools.py"
    tools.write_text("TOOLS = []\n")
    done = _acp("--agui-url", "http://127.0.0.1:9/agent", "--tools-module", str(tools))
    assert done.returncode == 2 and "--tools-module does not apply" in done.stderr


def test_the_readme_bridge_snippets_parse_as_the_same_bridge_command() -> None:
    import json
    import re

    from steerable_bridge.cli import build_parser

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### An AG-UI endpoint in your editor", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    servers = [next(iter(b["agent_servers"].values())) for b in blocks]
    assert len(servers) == 2 and servers[0]["args"] == servers[1]["args"]
    assert servers[0]["type"] == "custom" and servers[0]["command"] == servers[1]["command"]
    args = build_parser().parse_args(servers[0]["args"][1:])
    assert args.agui_url == "http://127.0.0.1:8000/agent"
    assert args.agui_header == ["Authorization: Bearer YOUR_TOKEN"]
