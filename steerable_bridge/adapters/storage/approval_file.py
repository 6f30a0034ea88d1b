"""Project approvals in one JSON file beside the sessions: `ApprovalFile(path, key_path)`.

Implements the runtime's `ApprovalMemory` port. The file (`approvals.json` in the store's
folder) maps each project root to its remembered answers, `{"version": 2, "projects":
{ROOT: {KEY: {"answer": "allow" | "reject", "mac": HEX}}}}`, where KEY is the runtime's
`approval_key` (`run_command:git status`, `write_file`). The file may lie where a model
can reach it (the store inside the project), so it is never trusted by itself: each
answer carries an HMAC-SHA256 over (root, key, answer) under a 32-byte secret kept in a
separate file (`approvals.key`, mode 0600, in the agent's state folder, which the
workspace tools refuse and the sandbox hides with the rest of the home unless the
workspace is the home itself). An answer whose MAC
does not verify — forged, copied from another project or key, or from the unsigned
version-1 format — is ignored and logged, so the call is asked about again; a missing
key file means nothing is trusted (it is made on the first `remember`). Signing beats
keeping grants only in the session store: the store can sit in the project too, and the
grants must outlive a session; a MAC makes every copy of the file, wherever it lies,
worthless to anyone without the key. What the MAC cannot stop is a process of the same
user that reads the key — a command run with `--sandbox off`; that is what `off` means.
Several agent processes may share the file: every change takes an exclusive `flock` on
a lock file beside it, re-reads the file and replaces it atomically (`os.replace`), so
no answer is lost and a reader never sees half a file; reads need no lock. An unreadable
file is logged and treated as empty (a change to it is refused with
`approvals_unreadable`, never overwriting it with less). Disk work runs in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from typing import Any

import anyio

from steerable_bridge.runtime.errors import CodedError

__all__ = ["ApprovalFile", "ApprovalFileError"]

log = logging.getLogger(__name__)


class ApprovalFileError(CodedError):
    """The approvals file cannot be changed; `code` is stable, the message names the fix."""


_KEY_BYTES = 32


class ApprovalFile:
    """Remembered "always" answers per project root; see the module docstring."""

    def __init__(self, path: str, key_path: str) -> None:
        self.path = os.path.abspath(path)
        self.key_path = os.path.abspath(key_path)
        self._key: bytes | None = None

    async def recall(self, root: str, key: str) -> bool | None:
        return await anyio.to_thread.run_sync(self._recall, root, key)

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

    def _recall(self, root: str, key: str) -> bool | None:
        data = self._read() or {}
        answers = data.get("projects", {}).get(root)
        entry = answers.get(key) if isinstance(answers, dict) else None
        if entry is None:
            return None
        answer = entry.get("answer") if isinstance(entry, dict) else None
        mac = entry.get("mac") if isinstance(entry, dict) else None
        secret = self._secret(create=False)
        if (
            secret is None
            or answer not in ("allow", "reject")
            or not isinstance(mac, str)
            or not hmac.compare_digest(mac, _mac(secret, root, key, str(answer)))
        ):
            log.warning(
                "approvals file %s holds an answer for %s in %s that this agent did not sign;"
                " it is ignored and the call is asked about",
                self.path,
                key,
                root,
            )
            return None
        return bool(answer == "allow")

    def _secret(self, *, create: bool) -> bytes | None:
        """The signing key (made, 0600, when `create` and there is none yet)."""
        if self._key is not None:
            return self._key
        try:
            with open(self.key_path, encoding="ascii") as handle:
                text = handle.read().strip()
            secret = bytes.fromhex(text)
        except FileNotFoundError:
            if not create:
                return None
            secret = self._make_secret()
        except (OSError, ValueError) as error:
            log.warning("approvals key %s is unreadable (%s)", self.key_path, error)
            return None
        if len(secret) < _KEY_BYTES:
            log.warning("approvals key %s is too short; nothing is trusted", self.key_path)
            return None
        self._key = secret
        return secret

    def _make_secret(self) -> bytes:
        os.makedirs(os.path.dirname(self.key_path), mode=0o700, exist_ok=True)
        secret = secrets.token_bytes(_KEY_BYTES)
        try:
            fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            with open(self.key_path, encoding="ascii") as handle:
                return bytes.fromhex(handle.read().strip())
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secret.hex())
            handle.flush()
            os.fsync(handle.fileno())
        return secret

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
            secret = self._secret(create=True)
            if secret is None:
                raise ApprovalFileError(
                    "approvals_unreadable",
                    f"{self.key_path} cannot be read, so the answer was not kept; delete it"
                    " (every remembered answer is then asked about again)",
                )
            projects = data.setdefault("projects", {})
            if not isinstance(projects.get(root), dict):
                projects[root] = {}
            entry = {"answer": answer, "mac": _mac(secret, root, key, answer)}
            projects.setdefault(root, {})[key] = entry
            data["version"] = 2
            prefix = os.path.basename(self.path) + ".tmp-"
            fd, temp = tempfile.mkstemp(prefix=prefix, dir=folder)
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


def _mac(secret: bytes, root: str, key: str, answer: str) -> str:
    message = json.dumps(["steerable-approval/2", root, key, answer], ensure_ascii=True)
    return hmac.new(secret, message.encode("ascii"), hashlib.sha256).hexdigest()
