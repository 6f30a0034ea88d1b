"""Control characters never reach the terminal: the one helper every command prints through,
and `run` / `sessions show` / `--timeline` on a session whose file name and model text carry
escape sequences (they are shown as `\\x1b...`, not obeyed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_bridge.commands.terminal import json_printable, printable

EVIL = "evil\x1b]0;pwned\x07\x1b[31m.txt"
"""Retitles the terminal window and turns the text red, if obeyed."""


def test_printable_escapes_c0_c1_del_and_bidi_but_keeps_layout() -> None:
    text = "a\x1b[2Jb\x9b31mc\x7fd\x00e\u202eF\nline\ttab"
    shown = printable(text)
    assert shown == "a\\x1b[2Jb\\x9b31mc\\x7fd\\x00e\\u202eF\nline\ttab"
    assert printable("one\ntwo\tx", layout=False) == "one\\x0atwo\\x09x"
    assert printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_json_printable_keeps_the_json_valid_and_equal() -> None:
    value = {"name": "x\x7f\x9b\u2066y", "ok": "ünï"}
    text = json_printable(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert not any(ch in text for ch in "\x7f\x9b\u2066")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    env |= {"STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(cwd / "state")}
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_run_and_sessions_show_escape_what_a_file_name_and_the_model_carry(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / EVIL).write_text("secret contents\n")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "rounds": [
                    {"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {}}]},
                    {
                        "tool_calls": [
                            {"id": "c2", "name": "read_file", "arguments": {"path": EVIL}}
                        ]
                    },
                    {"tool_calls": [{"id": "c3", "name": "nope\x1b[31m", "arguments": {}}]},
                    {"text": "Done.\x1b[2J\x1b]0;owned\x07 Bye."},
                ]
            }
        )
    )
    db = str(tmp_path / "sessions.db")
    ran = _cli(
        "run", "--model", f"scripted:{script}", "--storage", db, "--cwd", str(project), "look",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(_cli("sessions", "list", "--json", "--storage", db, cwd=tmp_path).stdout)
    session_id = listed["sessions"][0]["session_id"]
    shown = _cli("sessions", "show", session_id, "--storage", db, cwd=tmp_path)
    timeline = _cli("sessions", "show", session_id, "--timeline", "--storage", db, cwd=tmp_path)
    for done in (ran, shown, timeline):
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    assert "Done.\\x1b[2J\\x1b]0;owned\\x07 Bye." in ran.stdout
    assert "evil\\x1b]0;pwned\\x07\\x1b[31m.txt" in shown.stdout  # the list_dir result
    assert "tool nope\\x1b[31m" in timeline.stdout  # the model's (unknown) tool name
