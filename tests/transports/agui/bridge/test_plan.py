"""Plans read out of AG-UI servers' state and activity: the shapes agents use, and what is
not a plan."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.values import PlanEntry
from steerable_bridge.transports.agui.bridge.plan import plan_from_activity, plan_from_state


@pytest.mark.parametrize(
    ("state", "entries"),
    [
        (
            {"steps": [{"description": "search", "status": "completed"}, {"description": "write"}]},
            (PlanEntry(content="search", status="completed"), PlanEntry(content="write")),
        ),
        ({"todos": ["a", "b"]}, (PlanEntry(content="a"), PlanEntry(content="b"))),
        (
            {"plan": [{"title": "ship", "status": "in-progress", "priority": "high"}]},
            (PlanEntry(content="ship", status="in_progress", priority="high"),),
        ),
    ],
)
def test_plans_in_state_are_read(state: object, entries: tuple[PlanEntry, ...]) -> None:
    assert plan_from_state(state) == entries


@pytest.mark.parametrize(
    "state",
    [{}, {"steps": []}, {"steps": [{"count": 3}]}, {"steps": "abc"}, [1, 2], {"other": [1]}],
)
def test_state_that_is_not_a_plan_gives_none(state: object) -> None:
    assert plan_from_state(state) is None


def test_our_plan_activity_is_read_and_other_activities_are_not() -> None:
    content = {"entries": [{"content": "x", "priority": "low", "status": "pending"}]}
    assert plan_from_activity("plan", content) == (PlanEntry(content="x", priority="low"),)
    assert plan_from_activity("plan", {"entries": []}) == ()
    assert plan_from_activity("search", content) is None
