"""Which lane this run is: the fast lane (`-m "not slow"`) draws a share of a property test's
examples, the full suite (and CI, which runs it) draws them all.

The conftest sets `FAST` from the marker expression (`deselects_slow`) before any test module
is collected; a test module asks `examples(400)` for its `max_examples` (or its count of random
trials), and a test that checks every item of a long range asks `share(items)` for the ones it
checks. The fast lane also loads the derandomised `fast` profile (conftest), so the share it
draws is the same on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import TypeVar

from _pytest.mark.expression import Expression

T = TypeVar("T")

FAST = False
"""True when this run deselects `slow` tests (set by tests/conftest.py)."""

FAST_SHARE = 8
"""The fast lane draws one in `FAST_SHARE` of a test's full examples (at least ten, or all
of them when a test has fewer)."""


def deselects_slow(markexpr: str) -> bool:
    """Whether `-m markexpr` leaves out every test marked `slow`, whatever other markers it
    has: the expression is evaluated the way pytest evaluates it (its own parser), for `slow`
    with each combination of the other names it reads. So `not slow` and `not slow and not x`
    are the fast lane; `slow or not slow`, `interop`, `not slowish` and no expression are not."""
    if not markexpr.strip():
        return False
    expression = Expression.compile(markexpr)
    names = {"slow"}
    while True:
        read: set[str] = set()
        others = sorted(names - {"slow"})
        for chosen in product((False, True), repeat=len(others)):
            marks = {"slow", *(name for name, on in zip(others, chosen, strict=True) if on)}
            if _selects(expression, marks, read):
                return False
        if read <= names:
            return True
        names |= read


def _selects(expression: Expression, marks: set[str], read: set[str]) -> bool:
    """Whether `expression` selects a test with `marks`; the names it reads are added to
    `read`."""

    def marked(name: str, /, **_: object) -> bool:
        read.add(name)
        return name in marks

    return expression.evaluate(marked)


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
