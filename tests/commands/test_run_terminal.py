"""`steerable-bridge run` at a terminal: the approval prompt, Ctrl-C, what it shows, pipes.

Each test starts the real command in a fresh process, as a person types it: on a
pseudo-terminal that is its controlling terminal (`terminal.py`), with no terminal at all,
or with its stdout a pipe nobody reads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from tests.commands.terminal import COMMAND, AtTerminal, detached

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

SESSION_LINE = re.compile(r"^session: (sess_\w+) \(continue with --session \1\)$", re.M)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", "XDG_STATE_HOME": str(tmp / "state")}


def _work(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    return work


def _script(tmp: Path, command: str) -> str:
    rounds = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "done"},
    ]
    path = tmp / "script.json"
    path.write_text(json.dumps({"rounds": rounds}))
    return f"scripted:{path}"


def test_ctrl_c_at_the_prompt_cancels_the_turn_at_once_and_leaves_the_shell_its_input(
    tmp_path: Path,
) -> None:
    work = _work(tmp_path)
    argv = ["run", "--jsonl", "--cwd", str(work), "write a file"]
    person = AtTerminal.start(argv, _env(tmp_path))
    try:
        person.read_until("Allow Write demo-note.txt?")
        person.type("\x03")  # Ctrl-C, and no Enter after it
        code, out, err = person.finish()
        person.type("ls\n")  # what the person types next goes to the shell
        assert person.unread_line() == "ls\n"
    finally:
        person.close()
    assert code == 130, err
    events = [codec.event_from_json(line) for line in out.splitlines()]
    assert isinstance(events[-1], ev.RunFinished) and events[-1].stop_reason == "cancelled"
    assert "[cancelled]" in err and "Traceback" not in err
    assert not (work / "demo-note.txt").exists()
    session_id = SESSION_LINE.search(err)
    assert session_id is not None, err
    shown = subprocess.run(
        [*COMMAND, "sessions", "show", session_id.group(1)], capture_output=True, text=True,
        env=_env(tmp_path), timeout=30, check=False,
    )  # fmt: skip
    assert re.search(r"^status\s+idle$", shown.stdout, re.M), shown.stdout  # closed, not open


def test_keys_typed_before_the_question_do_not_answer_it(tmp_path: Path) -> None:
    work = _work(tmp_path)
    argv = ["run", "--cwd", str(work), "write a file"]
    person = AtTerminal.start(argv, _env(tmp_path), typed_ahead="y\n")
    try:
        person.read_until("Allow Write demo-note.txt?")
        assert not (work / "demo-note.txt").exists(), "the typed-ahead y answered"
        person.type("n\n")
        code, _, err = person.finish()
    finally:
        person.close()
    assert code == 0, err
    assert not (work / "demo-note.txt").exists()


def test_the_prompt_shows_the_diff_a_write_makes(tmp_path: Path) -> None:
    work = _work(tmp_path)
    (work / "demo-note.txt").write_text("old line\n")
    person = AtTerminal.start(["run", "--cwd", str(work), "write a file"], _env(tmp_path))
    try:
        screen = person.read_until("Allow Write demo-note.txt?")
        person.type("y\n")
        code, _, err = person.finish()
    finally:
        person.close()
    assert code == 0, err
    diff = screen[: screen.index("Allow")]
    assert "--- a/demo-note.txt" in diff and "+++ b/demo-note.txt" in diff
    assert "-old line" in diff and "+Written by the demo model." in diff
    assert (work / "demo-note.txt").read_text() == "Written by the demo model.\n"


def test_the_prompt_shows_the_command_and_run_shows_its_output(tmp_path: Path) -> None:
    work = _work(tmp_path)
    model = _script(tmp_path, "printf 'first\\nsecond\\n'")
    person = AtTerminal.start(["run", "--model", model, "--cwd", str(work), "go"], _env(tmp_path))
    try:
        screen = person.read_until("Allow")
        person.type("y\n")
        code, out, err = person.finish()
    finally:
        person.close()
    assert code == 0, err
    assert "$ printf 'first\\nsecond\\n'" in screen[: screen.index("Allow")]
    assert "  first\n  second\n  [exit code 0]\n" in err
    assert out.strip() == "done"


def test_long_output_is_cut_to_its_last_lines(tmp_path: Path) -> None:
    model = _script(tmp_path, "seq 1 30")
    argv = ["run", "--approve", "all", "--model", model, "--cwd", str(_work(tmp_path)), "go"]
    done = detached(argv, _env(tmp_path))
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stderr.splitlines() if line.startswith("  ")]
    assert shown[0] == "  ... 21 earlier lines"
    assert shown[1:] == [f"  {n}" for n in range(22, 31)] + ["  [exit code 0]"]


def test_run_names_its_session_and_settings_and_the_session_continues(tmp_path: Path) -> None:
    work = _work(tmp_path)
    first = detached(["run", "--cwd", str(work), "hello"], _env(tmp_path))
    assert first.returncode == 0, first.stderr
    storage = tmp_path / "state" / "steerable-bridge" / "sessions.db"
    assert (
        f"steerable-bridge: model demo:default, storage {storage}, workspace {work}"
        in first.stderr.splitlines()
    )
    found = SESSION_LINE.search(first.stderr)
    assert found is not None, first.stderr
    again = detached(
        ["run", "--cwd", str(work), "--session", found.group(1), "hello again"], _env(tmp_path)
    )
    assert again.returncode == 0, again.stderr
    assert f"session: {found.group(1)} " in again.stderr


def test_no_terminal_refuses_and_says_so(tmp_path: Path) -> None:
    work = _work(tmp_path)
    done = detached(["run", "--cwd", str(work), "write a file"], _env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "no terminal to ask (--approve ask); pass --approve all" in done.stderr
    assert not (work / "demo-note.txt").exists()


@pytest.mark.parametrize(
    "argv", [["run", "--jsonl", "think then use a tool"], ["run", "hello"], ["schema"]]
)
def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path, argv: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # `steerable-bridge ... | true`: nobody reads stdout
    try:
        done = subprocess.run(
            [*COMMAND, *argv], stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.PIPE,
            text=True, env=_env(tmp_path), timeout=30, check=False, start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 141
    assert [
        line for line in done.stderr.splitlines() if "steerable-bridge: model" not in line
    ] == []
