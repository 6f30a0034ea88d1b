"""Where a command keeps sessions: the `--storage` option, the store it names, the agent's files.

`add_storage_option(parser)` adds `--storage` (default `default_storage()`: `$STEERABLE_STORAGE`,
else `sessions.db` in the state folder, `state_dir()`); `build_store(spec)` opens `memory`, a
`postgresql://` URL or a SQLite file, refusing any other URL scheme by name; `check_storage`
refuses, before a command binds or answers, a store it could not use. Beside the store:
`approvals_path` / `build_approvals` (the signed "always" answers) and
`protect_agent_files`, which tells every workspace which files are the agent's own.
Mistakes raise `ConfigError` naming the remedy.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from steerable_bridge.commands.errors import ConfigError

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.storage import SessionStore
    from steerable_bridge.runtime.tool_calls.approvals import ApprovalMemory

__all__ = [
    "STORAGE_SCHEMES",
    "add_storage_option",
    "approvals_path",
    "build_approvals",
    "build_store",
    "check_storage",
    "default_storage",
    "protect_agent_files",
    "state_dir",
]


def default_storage() -> str:
    """`$STEERABLE_STORAGE`, else `$XDG_STATE_HOME/steerable-bridge/sessions.db`
    (`~/.local/state/...` when XDG_STATE_HOME is unset or not absolute)."""
    from steerable_bridge.commands.settings import SessionSettings

    configured = SessionSettings.lenient().storage
    if configured:
        return configured
    return os.path.join(state_dir(), "sessions.db")


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        default=default_storage(),
        help="where sessions live: a SQLite file shared safely by several processes on one"
        " machine, postgresql://user:password@host/db shared by several machines (needs the"
        " postgresql extra), or 'memory' (gone when the process exits); default"
        " $STEERABLE_STORAGE, else $XDG_STATE_HOME/steerable-bridge/sessions.db (now: %(default)s)",
    )


STORAGE_SCHEMES = ("postgresql", "postgres")
"""URL schemes `--storage` serves; anything else that looks like a URL is refused by name."""


def state_dir() -> str:
    """The agent's state folder: `$XDG_STATE_HOME/steerable-bridge` (`~/.local/state/...`
    when XDG_STATE_HOME is unset or not absolute; `settings.PathSettings`)."""
    from steerable_bridge.commands.settings import PathSettings

    return PathSettings.lenient().state_dir()


def approvals_path(spec: str) -> str | None:
    """Where "always" answers per project are kept: `approvals.json` beside a SQLite store,
    in the default state folder for a PostgreSQL one, nowhere for `memory`."""
    if spec == "memory":
        return None
    if _scheme(spec) is not None:
        return os.path.join(state_dir(), "approvals.json")
    return os.path.join(
        os.path.dirname(os.path.abspath(os.path.expanduser(spec))), "approvals.json"
    )


def build_approvals(spec: str) -> ApprovalMemory | None:
    """The project approvals kept for storage `spec` (see `approvals_path`), signed with
    the key in the state folder (`approval_file.py`)."""
    path = approvals_path(spec)
    if path is None:
        return None
    from steerable_bridge.adapters.storage.approval_file import ApprovalFile

    return ApprovalFile(path, os.path.join(state_dir(), "approvals.key"))


def protect_agent_files(spec: str, spill_root: str) -> None:
    """Tell every workspace which files are this agent's own (`agent_files.py`): the state
    folder, the spill folder, the SQLite store with its -wal/-shm/-journal siblings, and the
    approvals file with its lock and temporary files — wherever `--storage` put them."""
    from steerable_bridge.adapters.tools.agent_files import AGENT_FILES

    AGENT_FILES.keep_tree(state_dir(), "state folder")
    AGENT_FILES.keep_tree(spill_root, "tool-output spill folder")
    AGENT_FILES.keep_file(os.path.join(state_dir(), "approvals.key"), "approvals key")
    approvals = approvals_path(spec)
    if approvals is not None:
        AGENT_FILES.keep_file(approvals, "approvals file")
    if spec != "memory" and _scheme(spec) is None:
        AGENT_FILES.keep_file(os.path.abspath(os.path.expanduser(spec)), "session store")


def build_store(spec: str) -> SessionStore:
    """`memory`, a `postgresql://` URL, or the SQLite store at a file path (created on first
    use). A value with any other URL scheme (`mysql://...`) is refused, never taken for a
    file path."""
    if spec == "memory":
        from steerable_bridge.adapters.storage.memory import MemoryStore

        return MemoryStore()
    scheme = _scheme(spec)
    if scheme in STORAGE_SCHEMES:
        from steerable_bridge.adapters.storage.postgres import PostgresStore
        from steerable_bridge.runtime.ports.storage import StoreError

        try:
            return PostgresStore(spec)
        except StoreError as err:
            raise ConfigError(err.message) from None
    if scheme is not None:
        raise ConfigError(
            f"--storage {scheme}://... is not a store this build serves; use a file path"
            " (SQLite), postgresql://user:password@host/database, or memory"
        )
    from steerable_bridge.adapters.storage.sqlite import SqliteStore

    path = os.path.abspath(os.path.expanduser(spec))
    if os.path.isdir(path):
        raise ConfigError(
            f"--storage {spec!r} is a directory; give a file path such as {spec}/sessions.db"
        )
    return SqliteStore(path)


def check_storage(spec: str) -> None:
    """Refuse, with `ConfigError` naming the remedy, a store the command could not use: a
    file that is not a session store, a path that cannot be written, a PostgreSQL server
    that does not answer within the connect timeout (`adapters/storage/readiness.py`).
    Commands call it before they bind a port, answer an editor or start a turn."""
    if spec == "memory":
        return
    from steerable_bridge.adapters.storage import readiness

    scheme = _scheme(spec)
    if scheme in STORAGE_SCHEMES:
        from steerable_bridge.adapters.storage.postgres.driver import redact

        problem = readiness.postgres_problem(spec, redact(spec))
    elif scheme is not None:
        build_store(spec)  # refuses the scheme by name
        return
    else:
        path = os.path.abspath(os.path.expanduser(spec))
        if os.path.isdir(path):
            build_store(spec)  # refuses a directory with the remedy
        problem = readiness.sqlite_problem(path)
    if problem is not None:
        raise ConfigError(f"[{problem.code}] {problem.message}")


def _scheme(spec: str) -> str | None:
    """The URL scheme of `spec` (`postgresql` in `postgresql://...`), or None for a path."""
    head, sep, _ = spec.partition("://")
    if sep and head and head[0].isalpha() and all(c.isalnum() or c in "+-." for c in head):
        return head.lower()
    return None
