"""tools/prompt_path.py: the recorder counts what runs in its window only, and one real prompt
on each wire runs the modules that serve it (found by import, not by path)."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

import steerable_bridge.adapters.llm.openai_compat
import steerable_bridge.commands.common
import steerable_bridge.runtime.turns.loop
import steerable_bridge.transports.acp.server
import steerable_bridge.transports.agui.app

TOOL = Path(__file__).resolve().parents[2] / "tools" / "prompt_path.py"
PACKAGE = Path(steerable_bridge.__file__).resolve().parent


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prompt_path", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["prompt_path"] = module
    spec.loader.exec_module(module)
    return module


def relative(module: ModuleType) -> str:
    assert module.__file__ is not None
    return Path(module.__file__).resolve().relative_to(PACKAGE).as_posix()


def test_the_recorder_counts_functions_run_in_the_window_in_any_thread(
    tool: ModuleType, tmp_path: Path
) -> None:
    for name in ("early", "inside", "threaded"):
        (tmp_path / f"{name}.py").write_text("def f() -> int:\n    return 1\n")
    spec = {}
    touched = tool.Touched(tmp_path)
    with touched.installed():
        for name in ("early", "inside", "threaded"):  # module bodies run: they never count
            found = importlib.util.spec_from_file_location(f"pp_{name}", tmp_path / f"{name}.py")
            assert found is not None and found.loader is not None
            spec[name] = importlib.util.module_from_spec(found)
            found.loader.exec_module(spec[name])
        spec["early"].f()  # before the window
        with touched.window():
            spec["inside"].f()
            worker = threading.Thread(target=spec["threaded"].f)
            worker.start()
            worker.join(10)
    assert touched.relative() == ["inside.py", "threaded.py"]


@pytest.fixture(scope="module")
def measured(tool: ModuleType) -> dict[str, list[str]]:
    return {transport: tool.measure(transport) for transport in tool.TRANSPORTS}


@pytest.mark.parametrize(
    ("transport", "server", "other"),
    [
        ("acp", steerable_bridge.transports.acp.server, "transports/agui/"),
        ("agui", steerable_bridge.transports.agui.app, "transports/acp/"),
    ],
)
def test_one_prompt_runs_its_server_the_loop_and_the_http_provider(
    measured: dict[str, list[str]], transport: str, server: ModuleType, other: str
) -> None:
    files = measured[transport]
    assert relative(server) in files
    assert relative(steerable_bridge.runtime.turns.loop) in files
    assert relative(steerable_bridge.adapters.llm.openai_compat) in files
    assert not [path for path in files if path.startswith(other)], "the other wire ran"
    # build_agent runs at start-up only: the window must not reach back to it
    assert relative(steerable_bridge.commands.common) not in files
    assert all((PACKAGE / path).is_file() for path in files)
    assert len(files) > 10


def test_the_listing_groups_files_by_layer(tool: ModuleType) -> None:
    found = {"acp": ["runtime/turns/loop.py", "transports/acp/server.py", "adapters/llm/window.py"]}
    assert tool.lines(found, listing=True)[1:] == [
        "  acp: 3 files (transports 1, runtime 1, adapters 1)",
        "    transports/ 1",
        "      transports/acp/server.py",
        "    runtime/ 1",
        "      runtime/turns/loop.py",
        "    adapters/ 1",
        "      adapters/llm/window.py",
    ]
