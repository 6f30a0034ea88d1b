"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temp dir, 127.0.0.1.

`PgServer.start()` finds the binaries (`$STEERABLE_TEST_PG_BIN`, `pg_config --bindir`, or
the newest `/usr/lib/postgresql/*/bin`), creates a cluster with trust authentication in a
fresh temp directory, and starts it on a free loopback port with fsync off. PostgreSQL
refuses to run as root, so under root (CI) every command runs as the `postgres` user
through `runuser`, and the directory is handed to that user. `database()` creates an empty
database per test; `stop()` stops the server and removes the directory.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgServer", "find_bindir"]

USER = "steerable"


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl are, or None."""
    configured = os.environ.get("STEERABLE_TEST_PG_BIN")
    candidates = [configured] if configured else []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    return None


START_ATTEMPTS = 3
"""Starts tried, each on a newly picked port, while another process takes the port."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One cluster for a test session."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="steerable-pg-"))
        self.data = self.root / "data"
        self.port = 0  # picked by `start`, just before the server binds it
        self.as_postgres = os.geteuid() == 0
        self._databases = 0

    def _run(self, *args: str, timeout: float = 120) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> None:
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        log = self.root / "log"
        for attempt in range(START_ATTEMPTS):
            # PostgreSQL takes no port 0: a free port is picked now, and picked again when
            # another process bound it in the moment before the server did
            self.port = _free_port()
            options = (
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
            )
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(log),
                    "-w", "-t", "60", "start",
                )  # fmt: skip
                return
            except RuntimeError:
                taken = log.exists() and "already in use" in log.read_text(errors="replace")
                if not taken or attempt == START_ATTEMPTS - 1:
                    raise
                log.unlink()

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        self._databases += 1
        name = f"t{os.getpid()}_{self._databases}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
