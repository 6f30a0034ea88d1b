"""The fast lane is found from the `-m` expression as pytest reads it (tests/lanes.py), not
from a substring of it."""

from __future__ import annotations

import pytest

from tests import lanes
from tests.lanes import deselects_slow


@pytest.mark.parametrize(
    "markexpr",
    ["not slow", "not  slow", "(not slow)", "not slow and not interop", "not (slow or interop)"],
)
def test_an_expression_leaving_out_slow_tests_is_the_fast_lane(markexpr: str) -> None:
    assert deselects_slow(markexpr)


@pytest.mark.parametrize(
    "markexpr", ["", "  ", "slow", "slow or not slow", "not slowish", "not not slow", "interop"]
)
def test_an_expression_keeping_slow_tests_is_the_full_suite(markexpr: str) -> None:
    assert not deselects_slow(markexpr)


def test_this_run_is_the_lane_its_expression_names(pytestconfig: pytest.Config) -> None:
    assert deselects_slow(pytestconfig.option.markexpr or "") == lanes.FAST
