"""Project approvals in one JSON file beside the sessions: `ApprovalFile(path)`.

Implements the runtime's `ApprovalMemory` port. The file (`approvals.json` in the store's
folder) maps each project root to its remembered answers,
`{"version": 1, "projects": {ROOT: {KEY: "allow" | "reject"}}}`, where KEY is the runtime's
`approval_key` (`run_command:pytest`, `write_file`). Several agent processes may share it:
every change takes an exclusive `flock` on a lock file beside it, re-reads the file and
replaces it atomically (`os.replace`), so no answer is lost and a reader never sees half a
file; reads need no lock. A missing file means nothing is remembered; an unreadable one is
logged and treated the same (it is never overwritten with less than it held: a change to
an unreadable file is refused with `approvals_unreadable`). Disk work runs in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from typing import Any

import anyio

__all__ = ["ApprovalFile", "ApprovalFileError"]

log = logging.getLogger(__name__)


class ApprovalFileError(Exception):
    """The approvals file cannot be changed; `code` is stable, the message names the fix."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ApprovalFile:
    """Remembered "always" answers per project root; see the module docstring."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    async def recall(self, root: str, key: str) -> bool | None:
        projects = await anyio.to_thread.run_sync(self._projects)
        answer = projects.get(root, {}).get(key)
        return None if answer is None else answer == "allow"

    async def remember(self, root: str, key: str, allow: bool) -> None:
        await anyio.to_thread.run_sync(self._change, root, key, "allow" if allow else "reject")

    # -- blocking halves ---------------------------------------------------------------------

    def _read(self) -> dict[str, Any] | None:
        """The file's data; {} when missing, None when unreadable."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning(
                "approvals file %s is unreadable (%s); nothing is remembered", self.path, error
            )
            return None
        if not isinstance(data, dict) or not isinstance(data.get("projects", {}), dict):
            log.warning("approvals file %s has an unknown shape; nothing is remembered", self.path)
            return None
        return data

    def _projects(self) -> dict[str, dict[str, str]]:
        data = self._read() or {}
        projects = data.get("projects", {})
        return {
            root: answers
            for root, answers in projects.items()
            if isinstance(root, str) and isinstance(answers, dict)
        }

    def _change(self, root: str, key: str, answer: str) -> None:
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            if data is None:
                raise ApprovalFileError(
                    "approvals_unreadable",
                    f"{self.path} cannot be read, so the answer was not kept; fix or delete it",
                )
            projects = data.setdefault("projects", {})
            projects.setdefault(root, {})[key] = answer
            data["version"] = 1
            fd, temp = tempfile.mkstemp(prefix=".approvals-", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=1, sort_keys=True)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
