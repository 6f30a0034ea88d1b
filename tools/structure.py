"""Print the structure figures of `steerable_bridge` (issue 29): import circles, upward arrows,
long modules, complex functions and coded errors outside `CodedError`. Run it as
`uv run python tools/structure.py [ROOT]`, ROOT being the project directory (the one holding
`steerable_bridge/`, default this checkout). Circles are the strongly connected components of
the module import graph built from module-level imports only: those under `if TYPE_CHECKING:`
count in the first figure and not in the second, and imports inside functions, which run once
every module is loaded, count only in a third figure given for reference. `from pkg import
name` points at `pkg.name` when that is a module, else at `pkg`. Upward arrows are imports at
any depth, lazy ones included, that break the layer rule of DESIGN.md (runtime < adapters <
transports < conformance < commands, and the two transports never import each other).
Complexity is ruff's C901 over 15, run on the package. A coded error is an exception class
that sets `code` itself or inherits it from one that does; it should derive from
`runtime.errors.CodedError`. With `--prompt-path` it also serves one text prompt on each
wire and counts the package files that ran for it (`tools/prompt_path.py`, run on ROOT's
package in a child process), in a section of its own and the summary. The tool only reads the
tree and prints; it never edits a file, and it exits 0 whatever it finds.
"""

from __future__ import annotations

import ast
import builtins
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "steerable_bridge"
CODED_BASE = f"{PACKAGE}.runtime.errors.CodedError"
MAX_LINES = 450
MAX_COMPLEXITY = 15
LAYERS = ("runtime", "adapters", "transports", "conformance", "commands")
PEERS = (("transports.acp", "transports.agui"),)


@dataclass(frozen=True, slots=True)
class Import:
    """One imported module of the package, where it was imported and how."""

    source: str
    target: str
    line: int
    kind: str  # "module", "type_checking" or "lazy"


def discover(package_dir: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _walk(body: Iterable[ast.stmt], kind: str) -> Iterator[tuple[ast.stmt, str]]:
    """Import statements of `body` with the kind each runs as."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, kind
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, "lazy")
        elif isinstance(node, ast.If):
            inner = "type_checking" if kind == "module" and _is_type_checking(node.test) else kind
            yield from _walk(node.body, inner)
            yield from _walk(node.orelse, kind)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, ()):
                    if isinstance(child, ast.stmt):
                        yield from _walk([child], kind)
                    elif hasattr(child, "body"):  # except handlers, match cases
                        yield from _walk(child.body, kind)


def path_root(modules: dict[str, Path]) -> Path:
    """The directory holding the package (paths are printed relative to it)."""
    return modules[PACKAGE].parent.parent


def _package_of(name: str, modules: dict[str, Path]) -> str:
    """The package a relative import in `name` starts from."""
    return name if modules[name].name == "__init__.py" else name.rpartition(".")[0]


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """`name`, or its longest prefix that is a module of the package."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, modules: dict[str, Path]) -> list[Import]:
    """The package modules that module `name` imports, one entry per statement and target."""
    tree = ast.parse(modules[name].read_text(), filename=str(modules[name]))
    found: list[Import] = []
    for node, kind in _walk(tree.body, "module"):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package_of(name, modules).split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in modules else _known(base, modules))
        found.extend(
            Import(name, target, node.lineno, kind)
            for target in targets
            if target is not None and target != name
        )
    return list(dict.fromkeys(found))  # `from m import a, b`: one import of m, not two


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def graph(found: list[Import], modules: Iterable[str], kinds: set[str]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for item in found:
        if item.kind in kinds:
            edges[item.source].add(item.target)
    return edges


def _part(name: str) -> str:
    """The layer (or transport) a module belongs to: 'runtime', 'transports.acp', ..."""
    parts = name.split(".")[1:]
    if parts[:1] == ["transports"] and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def _rank(part: str) -> int | None:
    layer = part.split(".")[0]
    return LAYERS.index(layer) if layer in LAYERS else None


def upward(found: list[Import]) -> list[Import]:
    """Imports from a lower layer into a higher one, or between peer transports."""
    bad = []
    for item in found:
        source, target = _part(item.source), _part(item.target)
        low, high = _rank(source), _rank(target)
        peers = any({source, target} == set(pair) for pair in PEERS)
        if peers or (low is not None and high is not None and high > low):
            bad.append(item)
    return bad


def long_modules(modules: dict[str, Path]) -> list[tuple[int, str, bool]]:
    """(lines, module, generated) for each module over MAX_LINES lines, longest first."""
    rows = []
    for name, path in modules.items():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_LINES:
            rows.append((lines, name, "generated, not written by hand" in text[:500]))
    return sorted(rows, reverse=True)


def complex_functions(root: Path) -> list[str]:
    """ruff's C901 findings over MAX_COMPLEXITY, as 'path:line message'."""
    command = [
        *(sys.executable, "-m", "ruff", "check", "--no-cache", "--exit-zero"),
        *("--select", "C901", "--output-format", "json"),
        *("--config", f"lint.mccabe.max-complexity = {MAX_COMPLEXITY}", PACKAGE),
    ]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    rows = []
    for item in json.loads(done.stdout):
        path = Path(item["filename"]).resolve().relative_to(root.resolve())
        rows.append(f"{path}:{item['location']['row']} {item['message']}")
    return sorted(rows)


@dataclass(slots=True)
class _Class:
    bases: list[str]
    sets_code: bool
    where: str


def _classes(modules: dict[str, Path]) -> dict[str, _Class]:
    """Every top-level class by dotted name, its bases resolved through the module's imports."""
    found: dict[str, _Class] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = _package_of(name, modules).split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [_qualify(base, name, aliases) for base in node.bases]
                where = f"{path.relative_to(path_root(modules))}:{node.lineno}"
                found[f"{name}.{node.name}"] = _Class(
                    [b for b in bases if b], _sets_code(node), where
                )
    return found


def _qualify(expr: ast.expr, module: str, aliases: dict[str, str]) -> str:
    text = ast.unparse(expr)
    head, _, rest = text.partition(".")
    if head in aliases:
        return f"{aliases[head]}.{rest}" if rest else aliases[head]
    if hasattr(builtins, head):
        return f"builtins.{text}"
    return f"{module}.{text}"


def _sets_code(node: ast.ClassDef) -> bool:
    for item in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(item, ast.Assign):
            targets = item.targets
        elif isinstance(item, ast.AnnAssign | ast.AugAssign):
            targets = [item.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == "code":
                return True
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "code"
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                return True
    return False


def _reexported(name: str, classes: dict[str, _Class]) -> str:
    """Follow `pkg.mod.Name` through a package's re-export to the class it names."""
    seen = set()
    while name not in classes and name not in seen:
        seen.add(name)
        module, _, attr = name.rpartition(".")
        hits = [c for c in classes if c.rpartition(".")[2] == attr and c.startswith(module + ".")]
        if len(hits) != 1:
            break
        name = hits[0]
    return name


def stray_coded_errors(modules: dict[str, Path]) -> list[str]:
    """Exception classes with a `code` that do not derive from CodedError."""
    classes = _classes(modules)

    def ancestry(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        name = _reexported(name, classes)
        if name in seen or name not in classes:
            return {name}
        found = {name}
        for base in classes[name].bases:
            found |= ancestry(base, seen | {name})
        return found

    rows = []
    for name, info in sorted(classes.items()):
        lineage = ancestry(name)
        exception = any(
            n.startswith("builtins.")
            and isinstance(getattr(builtins, n[9:], None), type)
            and issubclass(getattr(builtins, n[9:]), BaseException)
            for n in lineage
        )
        coded = any(classes[n].sets_code for n in lineage if n in classes)
        if exception and coded and CODED_BASE not in lineage:
            rows.append(f"{name} ({info.where})")
    return rows


def report(root: Path) -> list[str]:
    """The figures as printable lines."""
    modules = discover(root / PACKAGE)
    found = [item for name in modules for item in imports_of(name, modules)]
    anywhere = circles(graph(found, modules, {"module", "type_checking", "lazy"}))
    with_tc = circles(graph(found, modules, {"module", "type_checking"}))
    runtime = circles(graph(found, modules, {"module"}))
    arrows = upward(found)
    longs = long_modules(modules)
    complexity = complex_functions(root)
    strays = stray_coded_errors(modules)
    out = [f"{PACKAGE}: {len(modules)} modules"]

    def section(title: str, rows: list[str]) -> None:
        out.append(f"\n{title}: {len(rows)}")
        out.extend(f"  {row}" for row in rows)

    section(
        "import circles (any depth, for reference: imports inside functions included)",
        [f"{len(c)}: {' '.join(c)}" for c in anywhere],
    )
    section(
        "import circles (module-level, TYPE_CHECKING included)",
        [f"{len(c)}: {' '.join(c)}" for c in with_tc],
    )
    section(
        "import circles (module-level, TYPE_CHECKING excluded)",
        [f"{len(c)}: {' '.join(c)}" for c in runtime],
    )
    section(
        "upward arrows (any depth)",
        [f"{a.source}:{a.line} -> {a.target} [{a.kind}]" for a in arrows],
    )
    section(
        f"modules over {MAX_LINES} lines",
        [f"{n} {name}{' (generated)' if gen else ''}" for n, name, gen in longs],
    )
    section(f"functions over complexity {MAX_COMPLEXITY}", complexity)
    section("coded errors not derived from CodedError", strays)
    out.append(
        "\nsummary: "
        f"circles {len(with_tc)} (modules {sum(map(len, with_tc))}),"
        f" without TYPE_CHECKING {len(runtime)} (modules {sum(map(len, runtime))}),"
        f" any depth {len(anywhere)};"
        f" upward arrows {len(arrows)};"
        f" long modules {len(longs)} ({sum(1 for *_, gen in longs if gen)} generated);"
        f" complex functions {len(complexity)}; stray coded errors {len(strays)}"
    )
    return out


def prompt_path(root: Path) -> dict[str, list[str]]:
    """`tools/prompt_path.py`'s files per transport, measured on ROOT's package."""
    import os

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, str(Path(__file__).with_name("prompt_path.py")), "--json"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"tools/prompt_path.py failed:\n{done.stderr.strip()}")
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def with_prompt_path(out: list[str], found: dict[str, list[str]]) -> list[str]:
    """`report`'s lines with the prompt-path counts as a section and in the summary."""
    *body, summary = out
    rows = [f"  {transport}: {len(files)} files" for transport, files in found.items()]
    counts = ", ".join(f"{transport} {len(files)}" for transport, files in found.items())
    return [
        *body,
        f"\nprompt path (files run by one text prompt, tools/prompt_path.py): {len(found)}",
        *rows,
        f"{summary}; prompt path files {counts}",
    ]


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv[1:]):
        print(__doc__)
        return 0
    rest = [arg for arg in argv[1:] if arg != "--prompt-path"]
    root = Path(rest[0]) if rest else Path(__file__).resolve().parent.parent
    out = report(root)
    if "--prompt-path" in argv[1:]:
        out = with_prompt_path(out, prompt_path(root))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
