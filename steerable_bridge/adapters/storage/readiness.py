"""Start-up checks of a session store: can a command use it, before it binds or answers?

`sqlite_problem(path)` opens the file (creating it and its folder, as the store would) and
checks that it is an SQLite database, that it holds this project's tables at a schema
version this build knows (or no tables yet), and that this process may write it (a
`BEGIN IMMEDIATE` that is rolled back). `postgres_problem(url)` connects once with a bounded
connect timeout (the URL's own `connect_timeout` when it has one, else
`DEFAULT_CONNECT_TIMEOUT_S`) and reads the schema version. Each returns None when the store
is usable, else a `StorageProblem` with a stable code and a one-line message naming the
remedy, which the commands print instead of a traceback. Only `sqlite3` is imported for a
file, so `acp` can check its store without loading the rest of the storage adapters before
it answers `initialize`. Nothing here keeps a connection open.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "SQLITE_SCHEMA_VERSION",
    "StorageProblem",
    "postgres_problem",
    "sqlite_problem",
]

SQLITE_SCHEMA_VERSION = 2
"""`PRAGMA user_version` of the SQLite store's tables (`sqlite.py`)."""

DEFAULT_CONNECT_TIMEOUT_S = 5
"""How long the start-up check waits for a PostgreSQL server that does not answer."""

_OUR_TABLES = frozenset({"sessions", "events", "signals"})


@dataclass(frozen=True, slots=True)
class StorageProblem:
    """Why a store cannot be used: a stable `code` and a message with the remedy."""

    code: str
    message: str


def sqlite_problem(path: str, *, busy_timeout_s: float = 10.0) -> StorageProblem | None:
    """None when the SQLite store at `path` can be opened, read and written."""
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        why = "a file is in the way" if isinstance(err, FileExistsError) else err.strerror
        return StorageProblem(
            "store_unavailable",
            f"cannot create the folder {folder} for the session store ({why});"
            " pass a --storage path in a folder you can write",
        )
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
    except sqlite3.Error as err:
        return _sqlite_failure(path, err)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if version > SQLITE_SCHEMA_VERSION:
            return StorageProblem(
                "store_too_new",
                f"{path} was created by a newer steerable-bridge (schema {version}; this build"
                f" knows {SQLITE_SCHEMA_VERSION}); upgrade steerable-bridge to use it",
            )
        foreign = sorted(t for t in tables - _OUR_TABLES if not t.startswith("sqlite_"))
        if version == 0 and foreign:
            return StorageProblem(
                "store_foreign",
                f"{path} is an SQLite database of another program (tables:"
                f" {', '.join(foreign[:5])}); pass a --storage path of its own",
            )
        conn.execute("BEGIN IMMEDIATE")  # takes the write lock: fails on a read-only file
        conn.execute("ROLLBACK")
    except sqlite3.Error as err:
        return _sqlite_failure(path, err)
    finally:
        conn.close()
    return None


def _sqlite_failure(path: str, err: sqlite3.Error) -> StorageProblem:
    text = str(err)
    if "not a database" in text or "malformed" in text:
        return StorageProblem(
            "store_corrupt",
            f"{path} is not a session store ({text}); pass another --storage path, or, if it"
            f" held sessions, run `steerable-bridge sessions check --storage {path}` and move"
            " it aside",
        )
    if "readonly" in text or "read-only" in text:
        return StorageProblem(
            "store_read_only",
            f"the session store {path} cannot be written ({text}); fix its permissions (and"
            " its folder's) or pass another --storage path",
        )
    if "locked" in text or "busy" in text:
        return StorageProblem(
            "store_busy",
            f"{path} stayed locked by another process ({text}); retry, or find the process"
            " holding it",
        )
    if "unable to open" in text:
        return StorageProblem(
            "store_unavailable",
            f"cannot open the session store {path} ({text}); check that the path and its"
            " folder exist and can be written, or pass another --storage path",
        )
    if "disk is full" in text or "disk I/O" in text:
        return StorageProblem(
            "storage_full" if "full" in text else "store_unavailable",
            f"cannot write the session store {path} ({text}); free some disk space or pass"
            " another --storage path",
        )
    return StorageProblem(
        "store_unavailable", f"cannot use the session store {path} ({text}); check the path"
    )


def postgres_problem(url: str, where: str) -> StorageProblem | None:
    """None when the PostgreSQL server at `url` answers and its schema is one this build
    knows; `where` is the URL without its password, for the message."""
    try:
        import psycopg
    except ImportError:
        return StorageProblem(
            "store_unavailable",
            "--storage postgresql://... needs psycopg: install steerable-bridge[postgresql]",
        )
    from steerable_bridge.adapters.storage.postgres.driver import SCHEMA
    from steerable_bridge.adapters.storage.postgres.schema import SCHEMA_VERSION

    timeout = _connect_timeout(url)
    try:
        with psycopg.connect(url, connect_timeout=timeout, autocommit=True) as conn:
            found = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.meta",)
            ).fetchone()
            version = 0
            if found is not None and found[0]:
                row = conn.execute(
                    f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
                ).fetchone()
                version = 0 if row is None else int(row[0])
    except (psycopg.Error, OSError) as err:
        text = " ".join(str(err).split()) or type(err).__name__
        return StorageProblem(
            "store_unavailable",
            f"cannot reach the PostgreSQL session store {where} within {timeout}s ({text});"
            " check that the server is up and the URL in --storage / STEERABLE_STORAGE",
        )
    if version > SCHEMA_VERSION:
        return StorageProblem(
            "store_too_new",
            f"{where} was set up by a newer steerable-bridge (schema {version}; this build"
            f" knows {SCHEMA_VERSION}); upgrade steerable-bridge to use it",
        )
    return None


def _connect_timeout(url: str) -> int:
    """The URL's `connect_timeout` (libpq's own setting) if given, else the default."""
    raw = parse_qs(urlsplit(url).query).get("connect_timeout", [""])[-1]
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_CONNECT_TIMEOUT_S
    return value if value > 0 else DEFAULT_CONNECT_TIMEOUT_S
