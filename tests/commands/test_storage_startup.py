"""A store a command cannot use, as a user meets it: `serve`, `acp`, `run` and `sessions`
check `--storage` before they bind, answer or start a turn, and say what is wrong in one
line on stderr (exit 2) — no URL printed, no traceback, no JSON-RPC answer, and a
PostgreSQL server that is down is reported within the connect timeout."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.refusing_port import refusing_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
NEW_SESSION = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp"}}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0"}


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )


def _commands(storage: str) -> list[tuple[list[str], str]]:
    requests = "".join(json.dumps(m) + "\n" for m in (INITIALIZE, NEW_SESSION))
    return [
        (["serve", "--port", "0", "--storage", storage], ""),
        (["acp", "--storage", storage], requests),
        (["run", "--no-workspace", "--storage", storage, "hello"], ""),
        (["sessions", "list", "--storage", storage], ""),
    ]


def _assert_one_line(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("steerable-bridge: [")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # no URL, no JSON-RPC answer, no reply text
    for needle in needles:
        assert needle in lines[0]


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    notadb = tmp_path / "notadb.txt"
    notadb.write_text("these are my notes, not a database\n" * 200)
    for args, stdin in _commands(str(notadb)):
        _assert_one_line(_run(*args, stdin=stdin), "store_corrupt", "--storage")
    assert notadb.read_text().startswith("these are my notes")  # left as it was


def test_a_path_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args, stdin in _commands(str(blocker / "sessions.db")):
        _assert_one_line(_run(*args, stdin=stdin), "store_unavailable", str(blocker))


def test_a_store_from_a_newer_build_or_another_program(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    _assert_one_line(_run("serve", "--port", "0", "--storage", str(newer)), "store_too_new")
    _assert_one_line(_run("serve", "--port", "0", "--storage", str(foreign)), "invoices")


def test_postgresql_down_is_one_line_within_the_connect_timeout() -> None:
    pytest.importorskip("psycopg")
    with refusing_port() as port:
        url = f"postgresql://nobody@127.0.0.1:{port}/sessions?connect_timeout=3"
        for args, stdin in _commands(url):
            _assert_one_line(_run(*args, stdin=stdin), "store_unavailable", "PostgreSQL")


def test_a_postgresql_server_that_never_answers_is_given_up_on() -> None:
    """A port that accepts but never speaks: the connect timeout (here the URL's own
    `connect_timeout=1`) ends the wait with the same one line."""
    pytest.importorskip("psycopg")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever replies
        port = silent.getsockname()[1]
        url = f"postgresql://nobody@127.0.0.1:{port}/sessions?connect_timeout=1"
        done = _run("serve", "--port", "0", "--storage", url)
    _assert_one_line(done, "store_unavailable", "within 1s")
