"""Which collected tests start a process, so the conftest marks them `slow` by itself.

`uv run pytest -m "not slow"` is the fast lane; it must not depend on every author
remembering `@pytest.mark.slow`. A test counts as spawning when its own body, a fixture it
uses, or a module-level function its module defines and it reaches (transitively, by name)
mentions one of `SPAWN_WORDS` (subprocess, `open_process`, the CLI run as `-m
steerable_bridge.cli`, ...) or is a helper imported from a `tests.` module that does (the
harnesses' stdio runners) or a `steerable_bridge` function that starts a process when called
(the conformance `run_acp`); or when it uses a fixture
from `SPAWNING_FIXTURES` (conftest fixtures that start a server process); or when it lives in
a directory of `SPAWNING_DIRS` (the interop tests drive third-party programs). Test modules
are read as text (a word anywhere in a helper counts); library modules are read by their
calls only (`SPAWN_CALLS`, or a call of a library function that makes one), since their
docstrings, annotations and classes name processes without starting any. Each module is
parsed once, and what the scan found is kept in `.pytest_cache/spawning.json` under a stamp
of every scanned file's path, size and modification time (and this module's own): parsing
some 500 modules was a third of the fast lane's collection, and an unchanged tree gives the
same answer, while any edit, added or removed file changes the stamp and the scan runs again."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = ["mark_spawning"]

SPAWN_WORDS = (
    "subprocess",
    "open_process",
    "create_subprocess",
    "sys.executable",
    "steerable_bridge.cli",
    "pg_server",
    "pg_url",
    "mcp_server.py",
    "bwrap",
    "stdio_client",
    "spawn_agent_process",
    '"-m", "steerable_bridge',
)
"""Text that, in a test's reach, means a process is started."""


SPAWNING_FIXTURES = frozenset(
    {"pg_server", "pg_url", "node", "local_env", "claude_acp", "codex_acp", "fast_agent_acp"}
    | {"pydantic_ai_agui", "langgraph_agui"}
)
"""Fixtures from a conftest that start a process (PostgreSQL, node, a third-party agent)."""

SPAWNING_DIRS = ("tests/interop/",)

SPAWN_CALLS = frozenset(
    {"open_process", "run_process", "create_subprocess_exec", "create_subprocess_shell"}
    | {"Popen", "spawn_agent_process", "stdio_client"}
)
"""Callees (the last part of a dotted name; any `subprocess.` call counts too) that start a
process: a `steerable_bridge` function making one of these calls spawns where it is called."""

LIBRARY = "steerable_bridge"

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".pytest_cache" / "spawning.json"
SCANNED = ("tests", LIBRARY)
"""The folders whose modules the scan may read, so whose every file is in the stamp."""
PRUNED = frozenset({"node_modules", "__pycache__", ".venv"})
_KNOWN: dict[Path, frozenset[str]] = {}
"""What the scan found for each module: this run's, and an earlier run's when the tree's
stamp still matches."""
_SCANNED_NOW: set[Path] = set()
"""The modules this run had to read (none when the cache answered for all)."""
_VISITING: set[Path] = set()
"""Modules being read, so two helper modules importing each other end the walk."""


def _spawning_names(path: Path) -> frozenset[str]:
    """Module-level names (tests, fixtures, helpers, constants) of `path` that reach a spawn."""
    known = _KNOWN.get(path)
    if known is not None:
        return known
    _VISITING.add(path)
    try:
        found = _library(path) if path.is_relative_to(ROOT / LIBRARY) else _read(path)
    finally:
        _VISITING.discard(path)
    _KNOWN[path] = found
    _SCANNED_NOW.add(path)
    return found


def _module_file(parts: list[str], base: Path) -> Path | None:
    """`base/a/b.py`, or the package's `base/a/b/__init__.py`, for the dotted `parts`."""
    for found in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if found.is_file():
            return found
    return None


def _local_module(path: Path, node: ast.AST) -> Path | None:
    """The file of a `from tests.x import ...`, `from steerable_bridge.x import ...` or
    `from .x import ...` in `path`, if any."""
    if not isinstance(node, ast.ImportFrom):
        return None
    parts = node.module.split(".") if node.module else []
    if node.level:
        return _module_file(parts, path.parents[node.level - 1]) if parts else None
    if parts and parts[0] in ("tests", LIBRARY):
        return _module_file(parts, ROOT)
    return None


STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
"""The fields of a node that hold statements (an `except` and a `case` keep theirs in `body`)."""


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement in `tree`, at any depth: an import is a statement, so finding one needs
    no walk through expressions, which are most of a module's nodes."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for field in STATEMENT_FIELDS:
            pending.extend(getattr(node, field, ()))


def _imported(path: Path, tree: ast.Module) -> set[str]:
    """Names `tree` imports from a local module in whose reach they start a process."""
    names: set[str] = set()
    for node in _statements(tree):
        helper_path = _local_module(path, node)
        if helper_path is not None and helper_path not in _VISITING:
            assert isinstance(node, ast.ImportFrom)
            reached = _spawning_names(helper_path)
            names |= {alias.asname or alias.name for alias in node.names if alias.name in reached}
    return names


def _grow(spawning: set[str], uses: dict[str, set[str]]) -> frozenset[str]:
    """`spawning` and every name whose `uses` reach it, transitively."""
    grew = True
    while grew:
        grew = False
        for name, used in uses.items():
            if name not in spawning and used & spawning:
                spawning.add(name)
                grew = True
    return frozenset(spawning)


def _callee(call: ast.Call) -> str:
    """The dotted name a call calls (`anyio.open_process`), or "" for anything else."""
    parts: list[str] = []
    func = call.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return ""
    return ".".join([func.id, *reversed(parts)])


def _library(path: Path) -> frozenset[str]:
    """The module-level functions of a library module that start a process when called: they
    call one of `SPAWN_CALLS`, or name (call, or pass to `anyio.run`) a spawning function of
    the module or one it imports (names imported from a spawning library module are kept too,
    so a package re-exports them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imported(path, tree)
    calls: dict[str, set[str]] = {}
    uses: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            calls[node.name] = {_callee(n) for n in ast.walk(node) if isinstance(n, ast.Call)}
            uses[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    spawning = {
        name
        for name, callees in calls.items()
        if any(c.startswith("subprocess.") or c.rpartition(".")[2] in SPAWN_CALLS for c in callees)
        or uses[name] & imported
    }
    return _grow(spawning, uses) | imported


def _segments(source: str) -> Callable[[ast.stmt], str]:
    """`ast.get_source_segment(source, node)` for `source`'s statements, with the source
    encoded and its lines found once (`get_source_segment` splits the whole source on every
    call, which made reading the test modules a noticeable share of collection)."""
    encoded = source.encode("utf-8")
    starts = [0] + [match.end() for match in re.finditer(rb"\r\n|\r|\n", encoded)]

    def segment(node: ast.stmt) -> str:
        end_lineno, end_col = node.end_lineno, node.end_col_offset
        if end_lineno is None or end_col is None:
            return ""
        first = starts[node.lineno - 1] + node.col_offset
        return encoded[first : starts[end_lineno - 1] + end_col].decode("utf-8")

    return segment


def _read(path: Path) -> frozenset[str]:
    """The body of `_spawning_names` for a test module: its names whose text reaches a spawn."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    helpers = _imported(path, tree)
    segment = _segments(source)
    bodies: dict[str, tuple[str, set[str]]] = {}
    for node in tree.body:
        if not isinstance(
            node,
            ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign,
        ):
            continue
        names: set[str] = set()
        stored: list[str] = []
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                names.add(child.id)
                if isinstance(child.ctx, ast.Store):
                    stored.append(child.id)
            elif isinstance(child, ast.arguments):
                names |= {a.arg for a in child.args}
        is_def = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        targets = [node.name] if is_def else stored
        text = segment(node)
        for target in targets:
            bodies[target] = (text, names)
    spawning = {
        name
        for name, (text, names) in bodies.items()
        if any(word in text for word in SPAWN_WORDS) or names & helpers
    }
    return _grow(spawning, {name: names for name, (_, names) in bodies.items()})


def _spawns(item: pytest.Item) -> bool:
    path = Path(item.path)
    if any(part in path.as_posix() for part in SPAWNING_DIRS):
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & SPAWNING_FIXTURES:
        return True
    function = getattr(item, "originalname", None) or item.name
    reach = _spawning_names(path)
    cls = getattr(item, "cls", None)
    return (
        function in reach or bool(fixtures & reach) or (cls is not None and cls.__name__ in reach)
    )


def _stamp(root: Path = ROOT) -> str:
    """A digest of every scanned file's path, size and modification time under `root`: the
    same stamp means the same sources, so the same scan."""
    digest = hashlib.blake2b(digest_size=16)
    for base in SCANNED:
        for folder, dirs, files in os.walk(root / base):
            dirs[:] = sorted(d for d in dirs if d not in PRUNED)
            for name in sorted(f for f in files if f.endswith(".py")):
                status = os.stat(os.path.join(folder, name))
                line = f"{folder}/{name}\0{status.st_size}\0{status.st_mtime_ns}\n"
                digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _load(stamp: str, cache: Path = CACHE) -> None:
    """Fill `_KNOWN` from the cache file if it was written for `stamp`."""
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(cached, dict) and cached.get("stamp") == stamp:
        modules = cached.get("modules", {})
        _KNOWN.update({Path(path): frozenset(names) for path, names in modules.items()})


def _save(stamp: str) -> None:
    """Write what this run's scan knows under `stamp` (a read-only checkout keeps no cache)."""
    if not _SCANNED_NOW:
        return
    modules = {str(path): sorted(names) for path, names in _KNOWN.items()}
    body = json.dumps({"stamp": stamp, "modules": modules}, sort_keys=True)
    try:
        CACHE.parent.mkdir(exist_ok=True)
        partial = CACHE.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(body, encoding="utf-8")
        partial.replace(CACHE)
    except OSError:
        return


def mark_spawning(items: list[pytest.Item]) -> None:
    """Add the `slow` marker to every item that starts a process (see the module docstring)."""
    stamp = _stamp()
    _load(stamp)
    for item in items:
        if item.get_closest_marker("slow") is None and _spawns(item):
            item.add_marker(pytest.mark.slow)
    _save(stamp)
