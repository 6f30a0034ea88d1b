"""`sessions` and `run --session` against a SQLite store shared by real processes.

Two processes on one store (one prompting, one listing, showing and trying to prompt the
same session), kill -9 mid-turn then a load in a fresh process (20 trials, several at a
time on one store), and the command-line face of damage: check, salvaging export, clear
errors for a file that is not a database.
"""

from __future__ import annotations

import json
import os
import random
import select
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.cli import main
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.codec import event_from_json
from steerable_bridge.runtime.ports.storage import SessionRecord

HANG = {"rounds": [{"text": "working on it", "chunk_size": 2, "delay_ms": 5, "hang": True}]}
DONE = {"rounds": [{"text": "all done"}]}
BUSY = {
    "loop": True,
    "rounds": [
        {
            "reasoning": "let me think about this",
            "text": "a few words, then a tool",
            "tool_calls": [{"id": "c1", "name": "calculate", "arguments": {"expression": "6*7"}}],
            "chunk_size": 3,
            "delay_ms": 1,
        },
        {
            "text": "and some more text",
            "tool_calls": [{"id": "c2", "name": "calculate", "arguments": {"expression": "1+"}}],
            "chunk_size": 2,
            "delay_ms": 1,
        },
    ],
}
"""Every round calls a tool, so the turn runs until its (huge) step limit or the kill."""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "steerable_bridge.cli", *args]


def env() -> dict[str, str]:
    return {**os.environ, "STEERABLE_DEMO_PACE_MS": "0", "PYTHONUNBUFFERED": "1"}


def script(tmp_path: Path, name: str, body: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(body))
    return f"scripted:{path}"


def run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args), capture_output=True, text=True, timeout=timeout, env=env(), check=False
    )


def first_lines(proc: subprocess.Popen[str], count: int, timeout: float = 10) -> list[str]:
    """Read `count` stdout lines from a running child, failing after `timeout` seconds."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while len(lines) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"child printed only {lines!r}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            line = proc.stdout.readline()
            assert line, f"child exited early with {proc.wait()}"
            lines.append(line)
    return lines


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def start_turn(
    children: list[subprocess.Popen[str]], db: Path, model: str, *extra: str
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        cli("run", "--storage", str(db), "--model", model, "--jsonl", *extra, "hello"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env(),
    )
    children.append(proc)
    return proc


def stored(db: Path, session_id: str) -> list[ev.LoopEvent]:
    async def read() -> list[ev.LoopEvent]:
        store = SqliteStore(db)
        try:
            return await store.read(session_id)
        finally:
            store.close()

    return anyio.run(read)


def assert_well_formed(events: list[ev.LoopEvent]) -> None:
    """Seqs contiguous; every run closed exactly once, last; nothing left open inside it."""
    assert [e.seq for e in events] == list(range(len(events)))
    runs: dict[str, list[ev.LoopEvent]] = {}
    for event in events:
        if event.run_id:
            runs.setdefault(event.run_id, []).append(event)
    for run_id, run in runs.items():
        ends = [e for e in run if isinstance(e, ev.RunFinished | ev.RunFailed)]
        assert len(ends) == 1 and run[-1] is ends[0], f"run {run_id} is not closed once, last"
        open_items: set[str] = set()
        for e in run:
            if isinstance(e, ev.TextStart | ev.ReasoningStart):
                open_items.add(e.message_id)
            elif isinstance(e, ev.TextEnd | ev.ReasoningEnd):
                open_items.discard(e.message_id)
            elif isinstance(e, ev.ToolCallEnd):
                open_items.add(e.call_id)
            elif isinstance(e, ev.ToolFinished):
                open_items.discard(e.call_id)
        assert not open_items, f"run {run_id} left {open_items} open"


@pytest.mark.timeout(40)
def test_two_processes_share_a_store_and_one_owns_the_running_session(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "shared.db"
    writer = start_turn(children, db, script(tmp_path, "hang", HANG))
    lines = first_lines(writer, 8)  # run_started … text deltas: the model now hangs
    session_id = json.loads(lines[0])["session_id"]

    listing = run_cli("sessions", "list", "--storage", str(db), "--json")
    assert listing.returncode == 0, listing.stderr
    assert [s["session_id"] for s in json.loads(listing.stdout)["sessions"]] == [session_id]

    shown = run_cli("sessions", "show", session_id, "--storage", str(db), "--json")
    info = json.loads(shown.stdout)
    assert info["status"] == "running" and f"process {writer.pid} " in info["owner"]
    assert info["title"] == "hello"

    second = run_cli(
        "run",
        "--storage",
        str(db),
        "--model",
        script(tmp_path, "done", DONE),
        "--session",
        session_id,
        "me too",
    )
    assert second.returncode == 1
    assert "session_owned" in second.stderr and f"process {writer.pid} " in second.stderr
    assert writer.poll() is None  # the owner was not disturbed

    writer.kill()
    writer.wait(timeout=10)
    shown = run_cli("sessions", "show", session_id, "--storage", str(db), "--json")
    assert json.loads(shown.stdout)["status"] == "interrupted"  # dead owner, run still open

    resumed = run_cli(
        "run",
        "--storage",
        str(db),
        "--model",
        script(tmp_path, "done", DONE),
        "--session",
        session_id,
        "again",
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "all done" in resumed.stdout
    events = stored(db, session_id)
    assert_well_formed(events)
    failed = [e for e in events if isinstance(e, ev.RunFailed)]
    assert [f.code for f in failed] == ["interrupted"]
    streamed = [e for e in events if isinstance(e, ev.TextDelta) and e.run_id == failed[0].run_id]
    assert "".join(e.delta for e in streamed) == "working on it"  # flushed while it stalled
    assert isinstance(events[-1], ev.RunFinished) and events[-1].stop_reason == "end_turn"
    check = run_cli("sessions", "check", "--storage", str(db))
    assert check.returncode == 0 and check.stdout.strip().endswith("ok"), check.stdout


START_WAIT_S = 30.0
"""Safety bound on a `run` process printing its first line (a loaded machine is slow)."""


def _wait_for_a_stored_run(db: Path, session_id: str) -> None:
    """Return once the store holds the session's `run_started` (bounded; the writer is
    another process, so its store is polled)."""
    deadline = time.monotonic() + START_WAIT_S
    while not any(isinstance(e, ev.RunStarted) for e in stored(db, session_id)):
        assert time.monotonic() < deadline, f"session {session_id}: no run stored"
        time.sleep(0.02)


def _kill_trial(db: Path, busy: str, done: str, trial: int) -> tuple[str, str, int]:
    """Start a long turn, SIGKILL it after a random delay, continue it in a fresh process."""
    rng = random.Random(trial)
    errors = db.parent / f"trial-{trial}.stderr"
    with errors.open("w") as stderr:
        proc = subprocess.Popen(
            cli(
                "run",
                "--storage",
                str(db),
                "--model",
                busy,
                "--max-steps",
                "100000",
                "--jsonl",
                f"trial {trial}",
            ),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env(),
        )
    try:
        try:
            first = first_lines(proc, 1, timeout=START_WAIT_S)[0]
        except AssertionError as failure:
            raise AssertionError(f"{failure}; its stderr: {errors.read_text()[-2000:]}") from None
        if trial % 2 == 0:  # these kills land once the run is stored, however loaded the machine
            _wait_for_a_stored_run(db, json.loads(first)["session_id"])
        time.sleep(rng.uniform(0.02, 0.3))  # where in the turn the kill lands: random
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
    session_id = json.loads(first)["session_id"]
    resumed = run_cli(
        "run", "--storage", str(db), "--model", done, "--session", session_id, "--jsonl", "continue"
    )
    return session_id, resumed.stderr, resumed.returncode


@pytest.mark.timeout(240)  # 40 processes started: minutes on a loaded machine
def test_kill_9_mid_turn_then_a_fresh_process_loads_and_continues(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    busy, done = script(tmp_path, "busy", BUSY), script(tmp_path, "done", DONE)
    trials = 20
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: _kill_trial(db, busy, done, t), range(trials)))
    interrupted = 0
    for session_id, stderr, code in results:
        assert code == 0, stderr
        events = stored(db, session_id)
        assert_well_formed(events)
        assert isinstance(events[-1], ev.RunFinished) and events[-1].stop_reason == "end_turn"
        interrupted += sum(
            1 for e in events if isinstance(e, ev.RunFailed) and e.code == "interrupted"
        )
        assert sum(1 for e in events if isinstance(e, ev.RunStarted)) in (1, 2)
    assert interrupted >= trials // 2  # every other kill landed after the run was stored
    check = run_cli("sessions", "check", "--storage", str(db), "--json")
    report = json.loads(check.stdout)
    assert report["ok"], report["problems"]
    assert report["sessions"] == trials


# -- in-process command tests (no turn runs, so no child is needed) ---------------------------


def _seed(db: Path, count: int) -> list[str]:
    """`count` sessions created through `run` in this process, oldest first."""
    ids = []
    for i in range(count):
        assert main(["run", "--storage", str(db), "--model", "demo:default", f"question {i}"]) == 0
        time.sleep(0.002)  # distinct updated_at
        ids.append(_newest(db))
    return ids


def _newest(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT session_id FROM sessions ORDER BY updated_at DESC").fetchone()
    return str(row[0])


@pytest.mark.timeout(30)
def test_list_pages_newest_first_show_export_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    db = tmp_path / "s.db"
    ids = _seed(db, 3)
    capsys.readouterr()
    seen: list[str] = []
    cursor: list[str] = []
    for _ in range(3):
        assert (
            main(["sessions", "list", "--storage", str(db), "--limit", "2", "--json", *cursor]) == 0
        )
        page = json.loads(capsys.readouterr().out)
        seen += [s["session_id"] for s in page["sessions"]]
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert seen == ids[::-1]

    assert main(["sessions", "show", ids[0], "--storage", str(db)]) == 0
    out = capsys.readouterr().out
    assert "question 0" in out and "status   idle" in out

    assert main(["sessions", "export", ids[0], "--storage", str(db)]) == 0
    exported = [event_from_json(line) for line in capsys.readouterr().out.splitlines()]
    assert exported == stored(db, ids[0])

    from steerable_bridge.adapters.tools.spill import FileSpill

    spill = FileSpill()  # under $XDG_STATE_HOME, which the test fixture points at tmp
    kept = [anyio.run(spill.save, sid, "c1", "full output") for sid in ids[:2]]
    assert main(["sessions", "delete", ids[0], "--storage", str(db)]) == 0
    assert not Path(kept[0]).parent.exists() and Path(kept[1]).exists()  # its outputs too
    assert main(["sessions", "show", ids[0], "--storage", str(db)]) == 1
    assert "session_not_found" in capsys.readouterr().err


@pytest.mark.timeout(30)
def test_a_damaged_row_is_reported_and_export_salvages_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    db = tmp_path / "s.db"
    (session_id,) = _seed(db, 1)
    total = len(stored(db, session_id))
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "UPDATE events SET data = 'garbage' WHERE session_id = ? AND seq = 4", (session_id,)
        )
    conn.close()
    capsys.readouterr()
    assert main(["sessions", "show", session_id, "--storage", str(db)]) == 1
    err = capsys.readouterr().err
    assert "corrupt_record" in err and "seq 4" in err

    assert main(["sessions", "check", "--storage", str(db)]) == 1
    out = capsys.readouterr().out
    assert "problem:" in out and "seq 4" in out

    assert main(["sessions", "export", session_id, "--storage", str(db)]) == 1
    captured = capsys.readouterr()
    salvaged = [event_from_json(line) for line in captured.out.splitlines()]
    assert [e.seq for e in salvaged] == [s for s in range(total) if s != 4]
    assert "skipped:" in captured.err and "seq 4" in captured.err


@pytest.mark.timeout(30)
def test_a_file_that_is_not_a_store_gives_one_clear_error_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    db = tmp_path / "s.db"
    db.write_bytes(os.urandom(8192))
    for args, code in (  # checked at start-up (2), or read row by row to salvage (1)
        (["sessions", "list"], 2),
        (["sessions", "show", "x"], 2),
        (["sessions", "export", "x"], 1),
        (["run", "hi"], 2),
    ):
        assert main([*args, "--storage", str(db)]) == code, args
        err = capsys.readouterr().err
        assert "store_corrupt" in err and "sessions check" in err, (args, err)
    assert main(["sessions", "check", "--storage", str(db)]) == 1
    assert "SQLite cannot read the file" in capsys.readouterr().out


def test_the_default_store_lives_under_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steerable_bridge.commands.storage_choice import default_storage

    monkeypatch.delenv("STEERABLE_STORAGE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_storage() == str(tmp_path / "steerable-bridge" / "sessions.db")
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_storage() == str(
        tmp_path / ".local" / "state" / "steerable-bridge" / "sessions.db"
    )
    monkeypatch.setenv("STEERABLE_STORAGE", "memory")
    assert default_storage() == "memory"


def _two_big_sessions(db: Path) -> None:
    async def build() -> None:
        store = SqliteStore(db)
        for sid in ("a", "b"):
            await store.create(SessionRecord(session_id=sid, cwd="/", created_at=1, updated_at=1))
            await store.append(
                sid,
                [
                    ev.TextDelta(  # a message each: one row each (not a run, `runs.py`)
                        session_id=sid, run_id="r", seq=i, ts=i, message_id=f"m{i}", delta="z" * 300
                    )
                    for i in range(400)
                ],
            )
        store.close()

    anyio.run(build)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.mark.timeout(30)
def test_a_damaged_page_is_found_by_check_and_export_salvages_around_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    _two_big_sessions(db)
    pages = db.stat().st_size // 4096
    with db.open("r+b") as file:  # overwrite one page in the middle of session a's rows
        file.seek(4096 * (pages // 5))
        file.write(b"\xff" * 4096)
    assert main(["sessions", "check", "--storage", str(db), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["sessions"] == 2 and report["problems"]
    assert any("integrity" in p for p in report["problems"])

    assert main(["sessions", "export", "a", "--storage", str(db)]) == 1
    captured = capsys.readouterr()
    written = [event_from_json(line) for line in captured.out.splitlines()]
    skipped = [line for line in captured.err.splitlines() if line.startswith("skipped:")]
    assert skipped and len(written) + len(skipped) == 400
    assert [e.seq for e in written] == sorted({e.seq for e in written})

    assert main(["sessions", "export", "b", "--storage", str(db)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 400
