"""Project notes: the AGENTS.md (and CLAUDE.md, .steerable/notes.md) a project keeps for agents.

`read_project_notes(cwd)` collects those files from the repository root (the nearest
ancestor holding `.git`; without one, the cwd alone) down to the session's cwd — the most
general first, the most specific last — and returns one bounded fragment between clear
start and end markers, or "" when there are none. Each file is cut to its share of
`max_chars` (about `max_chars / 4` tokens in all) with a note saying so. The runtime puts
the fragment in the session's system prompt, which every logged `model_request` holds, so
projection stays exact. Reads files only; never writes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["NOTE_FILES", "read_project_notes"]

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
