"""The dependency rule of DESIGN.md, checked on the source: who may import what."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "steerable_bridge"


def imports(path: Path) -> set[str]:
    """Every module name `path` imports, at any depth (lazy imports count too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(part: str) -> list[Path]:
    return sorted((PACKAGE / part).rglob("*.py"))


def offenders(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in paths:
        for name in imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path} imports {name}")
    return found


@pytest.mark.parametrize(
    ("part", "forbidden"),
    [
        (
            "runtime",
            (
                "steerable_bridge.adapters",
                "steerable_bridge.transports",
                "steerable_bridge.conformance",
                "steerable_bridge.commands",
                "acp",
                "ag_ui",
            ),
        ),
        (
            "adapters",
            (
                "steerable_bridge.transports",
                "steerable_bridge.conformance",
                "steerable_bridge.commands",
                "acp",
                "ag_ui",
            ),
        ),
        ("transports/acp", ("ag_ui", "steerable_bridge.transports.agui")),
        ("transports/agui", ("acp", "steerable_bridge.transports.acp")),
    ],
)
def test_each_part_imports_only_what_the_design_allows(
    part: str, forbidden: tuple[str, ...]
) -> None:
    assert offenders(modules(part), forbidden) == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from acp import schema\n")
    assert offenders([bad], ("acp",)) != []
