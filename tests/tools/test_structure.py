"""tools/structure.py on a tiny synthetic package: each figure finds what was planted in it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "structure.py"

FILES = {
    "__init__.py": "",
    "runtime/__init__.py": "",
    "runtime/errors.py": (
        "class CodedError(Exception):\n"
        "    def __init__(self, code: str, message: str) -> None:\n"
        "        super().__init__(message)\n"
        "        self.code = code\n"
    ),
    # a circle only through TYPE_CHECKING
    "runtime/agent.py": "from steerable_bridge.runtime import session\n",
    "runtime/session.py": (
        "from typing import TYPE_CHECKING\n"
        "from .errors import CodedError\n"
        "if TYPE_CHECKING:\n"
        "    from .agent import Agent\n"
        "class Busy(CodedError):\n"
        "    pass\n"
        "class Stray(ValueError):\n"
        "    code = 'stray'\n"
        "class StrayChild(Stray):\n"
        "    pass\n"
        "class NotAnError:\n"
        "    code = 'plain'\n"
    ),
    # a circle at runtime, and an upward arrow hidden in a function
    "adapters/__init__.py": "",
    "adapters/a.py": "from steerable_bridge.adapters import b\n",
    "adapters/c.py": "from steerable_bridge.adapters.a import one, two\n",
    "adapters/b.py": (
        "import steerable_bridge.adapters.a\n"
        "def late() -> None:\n"
        "    from steerable_bridge.commands import run\n"
    ),
    # peer transports, and a circle only through a lazy import
    "transports/__init__.py": "",
    "transports/acp/__init__.py": "",
    "transports/acp/x.py": "from ..agui import y\n",
    "transports/agui/__init__.py": "",
    "transports/agui/y.py": "def f() -> None:\n    from steerable_bridge.transports.acp import x\n",
    "commands/__init__.py": "",
    "commands/run.py": "from steerable_bridge.runtime.agent import session\n"
    + "x = 1\n" * 460
    + (
        "def knotty(a: int) -> int:\n"
        + "".join(f"    if a == {i}:\n        return {i}\n" for i in range(20))
        + "    return 0\n"
    ),
}


def plant(root: Path) -> Path:
    """Write the synthetic package under `root`; returns `root`."""
    for name, text in FILES.items():
        path = root / "steerable_bridge" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["structure"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lines(tool: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out: list[str] = tool.report(plant(tmp_path_factory.mktemp("project")))
    return out


def section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rows.append(line.strip())
    return rows


def test_circles_count_type_checking_only_in_the_first_figure(lines: list[str]) -> None:
    with_tc = section(lines, "import circles (module-level, TYPE_CHECKING included)")
    without = section(lines, "import circles (module-level, TYPE_CHECKING excluded)")
    agent = "2: steerable_bridge.runtime.agent steerable_bridge.runtime.session"
    adapters = "2: steerable_bridge.adapters.a steerable_bridge.adapters.b"
    assert sorted(with_tc) == sorted([agent, adapters])
    assert without == [adapters]


def test_a_lazy_import_makes_a_circle_only_at_any_depth(lines: list[str]) -> None:
    anywhere = section(lines, "import circles (any depth")
    assert "2: steerable_bridge.transports.acp.x steerable_bridge.transports.agui.y" in anywhere
    assert len(anywhere) == 3


def test_one_statement_naming_two_things_is_one_import(tool: ModuleType, tmp_path: Path) -> None:
    modules = tool.discover(plant(tmp_path) / "steerable_bridge")
    [only] = tool.imports_of("steerable_bridge.adapters.c", modules)
    assert (only.target, only.line, only.kind) == ("steerable_bridge.adapters.a", 1, "module")


def test_upward_arrows_include_lazy_imports_and_peer_transports(lines: list[str]) -> None:
    assert section(lines, "upward arrows") == [
        "steerable_bridge.adapters.b:3 -> steerable_bridge.commands.run [lazy]",
        "steerable_bridge.transports.acp.x:1 -> steerable_bridge.transports.agui.y [module]",
        "steerable_bridge.transports.agui.y:2 -> steerable_bridge.transports.acp.x [lazy]",
    ]


def test_long_modules_and_complex_functions(lines: list[str]) -> None:
    assert [row.split()[1] for row in section(lines, "modules over 450 lines")] == [
        "steerable_bridge.commands.run"
    ]
    [complex_row] = section(lines, "functions over complexity 15")
    assert complex_row.startswith("steerable_bridge/commands/run.py:")
    assert "`knotty` is too complex (21 > 15)" in complex_row


def test_coded_errors_outside_coded_error_are_named(lines: list[str]) -> None:
    assert [row.split()[0] for row in section(lines, "coded errors")] == [
        "steerable_bridge.runtime.session.Stray",
        "steerable_bridge.runtime.session.StrayChild",
    ]


def test_help_prints_the_usage_instead_of_reading_a_root_named_help(
    tool: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool.main(["structure.py", "--help"]) == 0
    assert "uv run python tools/structure.py [ROOT]" in capsys.readouterr().out
