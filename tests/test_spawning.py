"""The fast lane's scan (tests/spawning.py) finds a spawn behind a library helper: a test that
calls the conformance `run_acp` starts `steerable-bridge acp`, so it is `slow`, while one
that only serves the AG-UI app in this process is not."""

from __future__ import annotations

from tests.spawning import ROOT, _spawning_names


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
