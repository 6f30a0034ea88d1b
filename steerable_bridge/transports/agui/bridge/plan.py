"""A plan read out of what an AG-UI server sends: its activity snapshot, or its shared state.

Editors show an agent's plan (ACP `plan`); AG-UI has no plan event, so servers carry one in
two ways the bridge recognises. Our own server sends an ACTIVITY_SNAPSHOT of type `plan`
whose content holds `entries` (`plan_from_activity`); agents built on the AG-UI "agentic
generative UI" pattern keep the steps in their shared state, under `steps`, `plan` or
`todos`, each a string or an object with a text (`content`, `description`, `title`,
`step`, `text` or `task`) and a status (`plan_from_state`). Anything else is not a plan and
gives None. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from steerable_bridge.runtime.values import PlanEntry

__all__ = ["plan_from_activity", "plan_from_state"]

PLAN_KEYS = ("steps", "plan", "todos")
TEXT_KEYS = ("content", "description", "title", "step", "text", "task")

_STATUS: dict[str, Literal["pending", "in_progress", "completed"]] = {
    "pending": "pending",
    "todo": "pending",
    "not_started": "pending",
    "in_progress": "in_progress",
    "in-progress": "in_progress",
    "executing": "in_progress",
    "running": "in_progress",
    "active": "in_progress",
    "completed": "completed",
    "complete": "completed",
    "done": "completed",
    "finished": "completed",
}
_PRIORITY = ("high", "medium", "low")


def _entry(item: Any) -> PlanEntry | None:
    if isinstance(item, str):
        return PlanEntry(content=item) if item.strip() else None
    if not isinstance(item, Mapping):
        return None
    text = next((item[k] for k in TEXT_KEYS if isinstance(item.get(k), str)), None)
    if not text:
        return None
    status = _STATUS.get(str(item.get("status", "pending")).lower(), "pending")
    priority = item.get("priority")
    return PlanEntry(
        content=text,
        status=status,
        priority=priority if priority in _PRIORITY else "medium",
    )


def _entries(items: Any) -> tuple[PlanEntry, ...] | None:
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        return None
    entries = [_entry(item) for item in items]
    if any(entry is None for entry in entries):
        return None
    return tuple(entry for entry in entries if entry is not None)


def plan_from_state(state: Any) -> tuple[PlanEntry, ...] | None:
    """The plan a shared state holds, or None when it holds none."""
    if not isinstance(state, Mapping):
        return None
    for key in PLAN_KEYS:
        if key in state:
            return _entries(state[key])
    return None


def plan_from_activity(
    activity_type: str, content: Mapping[str, Any]
) -> tuple[PlanEntry, ...] | None:
    """The plan an ACTIVITY_SNAPSHOT carries (type `plan`), or None."""
    if activity_type != "plan":
        return None
    entries = content.get("entries")
    if isinstance(entries, list) and not entries:
        return ()
    return _entries(entries)
