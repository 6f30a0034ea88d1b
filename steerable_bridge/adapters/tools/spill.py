"""Full tool outputs kept on disk when the model only sees their head and tail.

`FileSpill` implements the runtime's `Spill` port: `save(session_id, call_id, text)` writes
`<root>/<session>/<call>.txt` (directories 0700, files 0600) and returns its path; the
root is `$XDG_STATE_HOME/steerable-bridge/spill` (`~/.local/state/...` when that is unset or
relative), beside the session store. `read_file` reads such a path for the session that owns it
(`spilled_path`), with `line` / `limit` paging, even though it lies outside the workspace;
another session's spill stays out of reach. `forget(session_id)` removes the session's
folder when the session is deleted (`Agent.delete_session`, `sessions delete`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import anyio

__all__ = ["FileSpill", "default_root", "spilled_path"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_root() -> Path:
    """`spill` in the agent's state folder: `$XDG_STATE_HOME/steerable-bridge`, where
    XDG_STATE_HOME counts only when absolute (the XDG rule `commands/settings.py` follows
    for the store and the approvals), else `~/.local/state/steerable-bridge`."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.expanduser("~/.local/state")
    return Path(state) / "steerable-bridge" / "spill"


def _name(value: str) -> str:
    return _UNSAFE.sub("_", value)[:120] or "_"


class FileSpill:
    """The `Spill` port over files (see the module docstring)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_root()

    async def save(self, session_id: str, call_id: str, text: str) -> str:
        folder = self.root / _name(session_id)
        path = folder / f"{_name(call_id)}.txt"

        def write() -> None:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)

        await anyio.to_thread.run_sync(write)
        return str(path)

    async def forget(self, session_id: str) -> None:
        """Remove the session's spilled outputs (raises OSError when they stay)."""
        folder = self.root / _name(session_id)

        def remove() -> None:
            if folder.is_symlink() or not folder.is_dir():
                return  # never follow a link out of the spill root
            shutil.rmtree(folder)

        await anyio.to_thread.run_sync(remove)


def spilled_path(path: str, session_id: str, root: Path | None = None) -> str | None:
    """The real path when `path` names a spill file of `session_id`, else None."""
    if not os.path.isabs(path):
        return None
    folder = os.path.realpath((root or default_root()) / _name(session_id))
    real = os.path.realpath(path)
    if real.startswith(folder + os.sep) and os.path.isfile(real):
        return real
    return None
