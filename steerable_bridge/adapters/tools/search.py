"""Looking around a workspace: list a directory, find files by glob, search text by regex.

These are the read-only halves of the workspace tools, always on the local disk (ACP has
no client-side listing or search) and always confined to the `Workspace`: walks never
follow symbolic links, and a file reached through a link that resolves outside is skipped,
as are the agent's own files (its store, approvals key, spill: `agent_files.py`).
`grep` uses ripgrep when it is on PATH — it honours `.gitignore`, is fast, and matches in
linear time — and a Python fallback otherwise that skips hidden and binary files but does
not read `.gitignore`, matches with RE2 (`google-re2`: linear time too, so `(a+)+$` cannot
run away; look-around and backreferences are refused, as ripgrep refuses them) and reads
each line's first `GREP_LINE_BYTES` only. A path that is a FIFO, socket or device is refused
(`not_a_regular_file`) before anything opens it. Every function bounds its output (entries,
matches, characters) and its time, and stops its work when its caller is cancelled:
ripgrep's process group is killed (`run_argv`), threads see their stop flag
(`stoppable.py`). Names that are not UTF-8 are shown with `\\xNN` escapes
(`file_names.py`), which `read_file` and the other tools accept back.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import anyio
import re2

from steerable_bridge.adapters.tools.file_names import shown
from steerable_bridge.adapters.tools.local_env import BINARY_SNIFF_BYTES, is_binary, run_argv
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.reading import bounded_lines, not_regular, special_kind
from steerable_bridge.adapters.tools.stoppable import run_stoppable
from steerable_bridge.runtime.encoding.surrogates import scrub
from steerable_bridge.runtime.ports.environment import WorkspaceError

__all__ = ["Found", "Matcher", "glob_files", "glob_regex", "grep", "linear_regex", "list_dir"]

MAX_ENTRIES = 500
MAX_MATCHES = 200
MAX_CHARS = 60_000
MAX_LINE_CHARS = 300
GREP_LINE_BYTES = 1024 * 1024
"""The fallback searches a line's first MiB only (ripgrep searches all of it)."""
WALK_SECONDS = 20.0
_SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the model's error, not a log line


class Matcher(Protocol):
    """A compiled RE2 pattern, as the searches here use one."""

    def search(self, text: str) -> object | None: ...

    def match(self, text: str) -> object | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """Lines of a listing or search, and whether the limit cut it short."""

    lines: tuple[str, ...]
    truncated: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


async def list_dir(workspace: Workspace, path: str) -> Found:
    """Entries of a directory: folders end in `/`, links show `-> target`."""
    real = workspace.resolve(path)
    return await run_stoppable(lambda stop: _list_dir(workspace, real))


def _list_dir(workspace: Workspace, real: str) -> Found:
    if not os.path.isdir(real):
        raise WorkspaceError(
            "not_a_directory", f"{real} is not a directory; use read_file to read a file"
        )
    lines: list[str] = []
    with os.scandir(real) as entries:
        items = sorted(entries, key=lambda e: e.name)
    for entry in items[:MAX_ENTRIES]:
        name = shown(entry.name)
        if entry.is_symlink():
            lines.append(f"{name} -> {shown(os.readlink(entry.path))}")
        elif entry.is_dir(follow_symlinks=False):
            lines.append(name + "/")
        else:
            lines.append(name)
    return Found(lines=tuple(lines), truncated=len(items) > MAX_ENTRIES)


def glob_regex(pattern: str) -> Matcher:
    """Compile a glob (`*`, `?`, `[...]`, `**` across folders) to match relative paths
    (with RE2: `*a*a*a*a*b` over a long name would backtrack for ages in `re`)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    try:
        compiled: Matcher = _Linear(re2.compile(scrub("".join(out)) + r"\z", _RE2_OPTIONS))
    except re2.error as err:
        raise WorkspaceError(
            "invalid_pattern", f"the glob {pattern!r} is not valid ({err}); fix the pattern"
        ) from err
    return compiled


async def glob_files(workspace: Workspace, pattern: str, path: str) -> Found:
    """Files under `path` whose path relative to it matches `pattern`, sorted."""
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise WorkspaceError(
            "invalid_pattern",
            f"the glob {pattern!r} must be relative and must not use '..'; pass the folder as path",
        )
    base = workspace.resolve(path)
    regex = glob_regex(pattern)
    return await run_stoppable(lambda stop: _glob(workspace, base, regex, stop))


def _walk(
    base: str, *, hidden: bool = True, stop: threading.Event | None = None
) -> list[tuple[str, str]]:
    """(relative path, real path) of files under base; no links followed, time-bounded,
    and over as soon as `stop` is set."""
    deadline = time.monotonic() + WALK_SECONDS
    found: list[tuple[str, str]] = []
    for root, dirs, files in os.walk(base, followlinks=False):
        if stop is not None and stop.is_set():
            break
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and (hidden or d[0] != "."))
        for name in sorted(files):
            if not hidden and name.startswith("."):
                continue
            full = os.path.join(root, name)
            found.append((os.path.relpath(full, base).replace(os.sep, "/"), full))
        if time.monotonic() > deadline:
            break
    return found


def _glob(workspace: Workspace, base: str, regex: Matcher, stop: threading.Event) -> Found:
    if not os.path.isdir(base):
        raise WorkspaceError("not_a_directory", f"{base} is not a directory to search in")
    lines: list[str] = []
    truncated = False
    for relative, full in _walk(base, stop=stop):
        if not regex.match(relative):
            continue
        if os.path.islink(full) and not workspace.contains(os.path.realpath(full)):
            continue
        if len(lines) >= MAX_ENTRIES:
            truncated = True
            break
        lines.append(shown(workspace.display(full)))
    return Found(lines=tuple(lines), truncated=truncated)


async def grep(
    workspace: Workspace,
    pattern: str,
    path: str,
    file_glob: str | None,
    *,
    use_ripgrep: bool | None = None,
) -> Found:
    """Lines matching the regex `pattern` as `path:line:text`; ripgrep when available."""
    target = workspace.resolve(path)
    try:
        re.compile(pattern)
    except re.error as err:
        raise WorkspaceError(
            "invalid_pattern", f"{pattern!r} is not a valid regular expression: {err}"
        ) from err
    regex = linear_regex(pattern)  # ripgrep's engine refuses the same things
    await anyio.to_thread.run_sync(_searchable, target)
    rg = shutil.which("rg") if use_ripgrep is not False else None
    if use_ripgrep and rg is None:
        raise WorkspaceError("ripgrep_missing", "ripgrep (rg) is not on PATH; install it")
    if rg is not None:
        return await _ripgrep(rg, workspace, pattern, target, file_glob)
    glob_re = glob_regex(file_glob) if file_glob else None
    return await run_stoppable(lambda stop: _python_grep(workspace, regex, target, glob_re, stop))


def _searchable(target: str) -> None:
    """A folder or a regular file; a FIFO, socket or device is refused before anything opens
    it (ripgrep would block on a FIFO named as the path; walks skip them by themselves)."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return  # the search reports a missing path in its own words
    if special_kind(mode) is not None:
        raise not_regular(target, mode)


class _Linear:
    """An RE2 pattern that also takes text UTF-8 cannot encode: a file name that is not
    UTF-8 arrives with lone surrogates (`surrogateescape`), which RE2, matching UTF-8,
    would refuse with an exception; such text is matched with U+FFFD in their place."""

    __slots__ = ("_compiled",)

    def __init__(self, compiled: Matcher) -> None:
        self._compiled = compiled

    def search(self, text: str) -> object | None:
        return self._compiled.search(text if text.isascii() else scrub(text))

    def match(self, text: str) -> object | None:
        return self._compiled.match(text if text.isascii() else scrub(text))


def linear_regex(pattern: str) -> Matcher:
    """`pattern` compiled by RE2, whose matching time is linear in the text (no
    catastrophic backtracking); what RE2 cannot do (look-around, backreferences) is refused,
    as ripgrep refuses it."""
    try:
        compiled = _Linear(re2.compile(scrub(pattern), _RE2_OPTIONS))
    except re2.error as err:
        raise WorkspaceError(
            "unsupported_pattern",
            f"{pattern!r} needs a feature this search does not run ({err}); look-around and"
            " backreferences are not supported — rewrite the pattern without them",
        ) from err
    return compiled


async def _ripgrep(
    rg: str, workspace: Workspace, pattern: str, target: str, file_glob: str | None
) -> Found:
    argv = [
        rg,
        "--line-number",
        "--no-heading",
        "--with-filename",
        "--color=never",
        "--no-config",
        f"--max-columns={MAX_LINE_CHARS}",
        "--max-columns-preview",
    ]
    if file_glob:
        argv += ["--glob", file_glob]
    argv += ["--regexp", pattern, "--", workspace.display(target)]
    result = await run_argv(
        argv, cwd=workspace.cwd, timeout_s=WALK_SECONDS, output_limit=MAX_CHARS * 4
    )
    if result.timed_out:
        raise WorkspaceError(
            "search_timeout", f"the search took longer than {WALK_SECONDS:g}s; narrow the path"
        )
    lines = [line for line in result.output.splitlines() if line]
    problems = [line for line in lines if line.startswith("rg: ")]
    matches = [
        line.removeprefix("./")
        for line in lines
        if not line.startswith("rg: ") and not _agent_file(workspace, line)
    ]
    if result.exit_code not in (0, 1) and not matches:
        detail = "; ".join(problems)[:500] or f"exit code {result.exit_code}"
        raise WorkspaceError(
            "search_failed", f"ripgrep failed: {detail}; check the pattern and the path"
        )
    return _bounded(matches, result.truncated)


def _agent_file(workspace: Workspace, line: str) -> bool:
    """A ripgrep match in one of the agent's own files (`agent_files.py`), left out."""
    relative = line.split(":", 1)[0]
    real = os.path.realpath(os.path.join(workspace.cwd, relative))
    return workspace.private.refusal(real) is not None


def _python_grep(
    workspace: Workspace,
    regex: Matcher,
    target: str,
    glob_re: Matcher | None,
    stop: threading.Event,
) -> Found:
    if os.path.isdir(target):
        files = _walk(target, hidden=False, stop=stop)
    else:
        files = [(os.path.basename(target), target)]
    deadline = time.monotonic() + WALK_SECONDS
    lines: list[str] = []
    for relative, full in files:
        if glob_re is not None and not (
            glob_re.match(relative) or glob_re.match(os.path.basename(relative))
        ):
            continue
        if time.monotonic() > deadline or len(lines) > MAX_MATCHES:
            break
        lines.extend(_grep_file(workspace, regex, full, deadline, stop))
    return _bounded(lines, False)


def _grep_file(
    workspace: Workspace,
    regex: Matcher,
    full: str,
    deadline: float,
    stop: threading.Event,
) -> list[str]:
    real = os.path.realpath(full)
    if not workspace.contains(real) or workspace.private.refusal(real) is not None:
        return []  # outside, or one of the agent's own files
    try:
        fd = workspace.open_file(real, os.O_RDONLY)  # regular files only, never blocks
    except WorkspaceError:
        return []
    with os.fdopen(fd, "rb") as handle:
        if is_binary(handle.read(BINARY_SNIFF_BYTES)):
            return []
        handle.seek(0)
        where = shown(workspace.display(full))
        hits: list[str] = []
        lines = bounded_lines(handle, GREP_LINE_BYTES, stop)
        for number, (raw, _cut) in enumerate(lines, start=1):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if regex.search(text):
                hits.append(f"{where}:{number}:{text[:MAX_LINE_CHARS]}")
                if len(hits) > MAX_MATCHES:
                    break
            if number % 1024 == 0 and time.monotonic() > deadline:
                break
        return hits


def _bounded(lines: list[str], truncated: bool) -> Found:
    kept: list[str] = []
    size = 0
    for line in lines:
        if len(kept) >= MAX_MATCHES or size + len(line) > MAX_CHARS:
            return Found(lines=tuple(kept), truncated=True)
        kept.append(line)
        size += len(line) + 1
    return Found(lines=tuple(kept), truncated=truncated)
