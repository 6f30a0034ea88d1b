"""The fast lane's scan (tests/spawning.py) finds a spawn behind a library helper: a test that
calls the conformance `run_acp` starts `steerable-bridge acp`, so it is `slow`, while one
that only serves the AG-UI app in this process is not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.spawning import _KNOWN, ROOT, _load, _spawning_names, _stamp


def test_a_library_function_that_starts_a_process_is_found_through_its_callers() -> None:
    live = _spawning_names(ROOT / "steerable_bridge/conformance/live.py")
    assert "run_acp" in live
    assert "run_agui" not in live
    command = _spawning_names(ROOT / "steerable_bridge/commands/conformance.py")
    assert "main" in command  # it hands `_run`, which plays scenarios over ACP, to anyio.run


def test_a_test_calling_a_spawning_library_helper_is_marked() -> None:
    reach = _spawning_names(ROOT / "tests/conformance/test_live.py")
    assert "test_scenario_through_the_real_transports" in reach


def test_library_docstrings_and_classes_naming_processes_do_not_spread_the_mark() -> None:
    assert _spawning_names(ROOT / "steerable_bridge/runtime/events.py") == frozenset()
    assert "LocalEnvironment" not in _spawning_names(
        ROOT / "steerable_bridge/adapters/tools/local_env.py"
    )


def test_the_stamp_changes_with_any_scanned_file_and_ignores_installed_packages(
    tmp_path: Path,
) -> None:
    (tmp_path / "tests/node_modules/pkg").mkdir(parents=True)
    (tmp_path / "steerable_bridge").mkdir()
    helper = tmp_path / "tests/helper.py"
    helper.write_text("x = 2\n")
    (tmp_path / "steerable_bridge/mod.py").write_text("x = 1\n")
    installed = tmp_path / "tests/node_modules/pkg/vendored.py"
    installed.write_text("x = 1\n")
    first = _stamp(tmp_path)
    assert _stamp(tmp_path) == first
    installed.write_text("x = 22\n")
    assert _stamp(tmp_path) == first
    helper.write_text("x = 2  # edited\n")
    edited = _stamp(tmp_path)
    assert edited != first
    (tmp_path / "steerable_bridge/new.py").write_text("")
    assert _stamp(tmp_path) not in (first, edited)


def test_a_cache_written_for_another_stamp_is_not_believed(tmp_path: Path) -> None:
    module = tmp_path / "tests/test_made_up.py"
    cache = tmp_path / "spawning.json"
    cache.write_text(json.dumps({"stamp": "old", "modules": {str(module): ["test_x"]}}))
    _load("new", cache)
    assert module not in _KNOWN
    _load("old", cache)
    try:
        assert _KNOWN[module] == frozenset({"test_x"})
    finally:
        del _KNOWN[module]


def test_what_the_cache_says_is_what_a_fresh_scan_finds() -> None:
    path = ROOT / "tests/conformance/test_live.py"
    cached = _spawning_names(path)
    del _KNOWN[path]
    assert _spawning_names(path) == cached
