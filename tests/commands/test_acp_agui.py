"""`steerable-bridge acp --agui-url`: option mistakes exit 2 with one line naming the remedy,
before anything is answered on stdout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _acp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "acp", "--storage", "memory", *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


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


def test_tools_modules_do_not_apply_to_a_bridged_endpoint(tmp_path: Path) -> None:
    tools = tmp_path / "tools.py"
    tools.write_text("TOOLS = []\n")
    done = _acp("--agui-url", "http://127.0.0.1:9/agent", "--tools-module", str(tools))
    assert done.returncode == 2 and "--tools-module does not apply" in done.stderr
