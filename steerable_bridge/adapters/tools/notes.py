"""Project notes: the AGENTS.md (and CLAUDE.md, .steerable/notes.md) a project keeps for agents.

`read_project_notes(cwd)` collects those files from the repository root (the nearest
ancestor holding `.git`; without one, the cwd alone) down to the session's cwd — the most
general first, the most specific last — and returns one bounded fragment between clear
start and end markers, or "" when there are none. Each file is cut to its share of
`max_chars` (about `max_chars / 4` tokens in all) with a note saying so. The runtime puts
the fragment in the session's system prompt, which every logged `model_request` holds, so
projection stays exact. Reads files only; never writes.
`ProjectNotes().read(cwd)` is how a server reads them for each session it makes: off the
event loop, in a worker thread, with sessions made close together in one folder sharing
one read (concurrent callers join the read under way, and a read is reused for `fresh_s`
seconds), so a burst of new sessions costs one thread hop, not one each — a thread hop
under a busy event loop waits for the GIL and stalls every other request. An edited
AGENTS.md reaches the sessions made `fresh_s` (2 s) after the edit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread

__all__ = ["NOTE_FILES", "ProjectNotes", "read_project_notes"]

NOTE_FILES = ("AGENTS.md", "CLAUDE.md", os.path.join(".steerable", "notes.md"))
MAX_CHARS = 8000
_FILE_BYTES = 256 * 1024


def _folders(cwd: Path) -> list[Path]:
    """From the repository root down to `cwd` (just `cwd` outside a repository)."""
    chain = [cwd, *cwd.parents]
    for index, folder in enumerate(chain):
        if (folder / ".git").exists():
            return list(reversed(chain[: index + 1]))
    return [cwd]


def read_project_notes(cwd: str, *, max_chars: int = MAX_CHARS) -> str:
    """The notes fragment for a session in `cwd` ("" when the project has none)."""
    found: list[tuple[Path, str]] = []
    for folder in _folders(Path(os.path.realpath(cwd))):
        for name in NOTE_FILES:
            path = folder / name
            try:
                if not path.is_file():
                    continue
                with path.open("rb") as handle:
                    text = handle.read(_FILE_BYTES).decode("utf-8", errors="replace").strip()
            except OSError:
                continue
            if text:
                found.append((path, text))
    if not found:
        return ""
    share = max(200, max_chars // len(found))
    parts = [
        "<project-notes>",
        "Notes the project keeps for agents working in it (most specific last). Follow them"
        " where they apply; the user's requests come first.",
    ]
    for path, text in found:
        if len(text) > share:
            text = text[:share].rstrip() + f"\n[... cut: {path.name} has {len(text)} characters]"
        parts += [f"--- {path} ---", text]
    parts.append("</project-notes>")
    return "\n".join(parts)


class ProjectNotes:
    """Reads project notes for new sessions, sharing reads (see the module docstring)."""

    def __init__(
        self,
        *,
        fresh_s: float = 2.0,
        max_folders: int = 64,
        read: Callable[[str], str] = read_project_notes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fresh_s = fresh_s
        self.max_folders = max_folders
        self.reads = 0
        """How many times the files were read (tests assert sharing with it)."""
        self._read = read
        self._clock = clock
        self._done: dict[str, tuple[float, str]] = {}
        self._reading: dict[str, anyio.Event] = {}

    async def read(self, cwd: str) -> str:
        """The notes fragment for a session in `cwd` ("" when the project has none)."""
        while True:
            done = self._done.get(cwd)
            if done is not None and self._clock() - done[0] < self.fresh_s:
                return done[1]
            reading = self._reading.get(cwd)
            if reading is None:
                break
            await reading.wait()  # bounded: the read under way is a few file reads
        finished = anyio.Event()
        self._reading[cwd] = finished
        try:
            started = self._clock()
            self.reads += 1
            text = await anyio.to_thread.run_sync(self._read, cwd)
            self._done.pop(cwd, None)
            self._done[cwd] = (started, text)
            while len(self._done) > self.max_folders:
                del self._done[next(iter(self._done))]
            return text
        finally:
            del self._reading[cwd]
            finished.set()
