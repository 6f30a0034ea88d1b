"""Which lane this run is: the fast lane (`-m "not slow"`) draws a share of a property test's
examples, the full suite (and CI, which runs it) draws them all.

The conftest sets `FAST` from the marker expression before any test module is collected; a
test module asks `examples(400)` for its `max_examples` (or its count of random trials), and
a test that checks every item of a long range asks `share(items)` for the ones it checks. The
fast lane also loads the derandomised `fast` profile (conftest), so the share it draws is the
same on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

FAST = False
"""True when this run deselects `slow` tests (set by tests/conftest.py)."""

FAST_SHARE = 8
"""The fast lane draws one in `FAST_SHARE` of a test's full examples (at least ten, or all
of them when a test has fewer)."""


def examples(full: int) -> int:
    """`full` in the full suite; a fixed share of it (at least ten, never more than `full`)
    in the fast lane."""
    return min(full, max(10, full // FAST_SHARE)) if FAST else full


def share(items: Sequence[T]) -> Sequence[T]:
    """All of `items` in the full suite; every `FAST_SHARE`-th of them (the first and last
    included) in the fast lane: a test adds the items it must always check itself."""
    if not FAST or len(items) <= 2:
        return items
    return [*items[:-1:FAST_SHARE], items[-1]]
