"""The fast lane, and only it, is handed to one xdist worker per core (tests/lane_workers.py)."""

from __future__ import annotations

import pytest

from tests.lane_workers import workers


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEERABLE_TEST_WORKERS", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


def test_the_fast_lane_gets_a_worker_per_core_and_the_full_suite_none() -> None:
    assert workers(["-m", "not slow"], "not slow", 2) == 2
    assert workers([], "", 2) == 0
    assert workers(["-m", "slow or not slow"], "slow or not slow", 2) == 0
    assert workers(["-m", "not slow"], "not slow", 1) == 0


def test_a_run_that_says_how_to_distribute_or_only_collects_is_left_alone() -> None:
    for told in (["-n", "4"], ["-n4"], ["--numprocesses=3"], ["--dist", "no"], ["--co"]):
        assert workers(["-m", "not slow", *told], "not slow", 2) == 0
    assert workers(["-p", "no:xdist"], "not slow", 2) == 0


def test_the_environment_sets_the_count_and_a_worker_never_spreads_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_TEST_WORKERS", "0")
    assert workers([], "not slow", 2) == 0
    monkeypatch.setenv("STEERABLE_TEST_WORKERS", "3")
    assert workers([], "not slow", 2) == 3
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert workers([], "not slow", 2) == 0
