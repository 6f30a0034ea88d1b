"""The fast lane runs on every core: `uv run pytest -m "not slow"` hands its tests to
pytest-xdist workers, one per CPU, without anybody typing `-n`.

Loaded by `-p tests.lane_workers` (pyproject's `addopts`), before the command line is
parsed, so it can add `-n <cores>` to it. It does so only for the fast lane (the `-m`
expression leaves out every `slow` test, `tests/lanes.py`): the full suite, which CI runs,
spawns agents, editors and databases whose deadlines were measured one test at a time, so it
stays serial. It adds nothing when the run already says how to distribute (`-n`, `--dist`,
`-p no:xdist`), only collects, runs on one core, or is itself an xdist worker;
`STEERABLE_TEST_WORKERS=0` (or any count) overrides the core count.
"""

from __future__ import annotations

import os

import pytest

from tests import lanes

__all__ = ["pytest_load_initial_conftests", "workers"]


def workers(args: list[str], markexpr: str, cores: int | None) -> int:
    """How many workers the run `args` with `-m markexpr` gets (0: run in this process)."""
    chosen = os.environ.get("STEERABLE_TEST_WORKERS")
    if os.environ.get("PYTEST_XDIST_WORKER") or not lanes.deselects_slow(markexpr):
        return 0
    told = ("-n", "--numprocesses", "--dist", "--collect-only", "--co", "no:xdist")
    if any(arg.split("=", 1)[0] in told or arg.startswith("-n") for arg in args):
        return 0
    count = int(chosen) if chosen is not None and chosen.strip().isdigit() else (cores or 1)
    return count if count > 1 else 0


def _cores() -> int | None:
    """The CPUs this process may run on (all of them where affinity is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Add `-n <workers>` to the fast lane's command line (see the module docstring)."""
    del parser
    markexpr = getattr(early_config.known_args_namespace, "markexpr", "") or ""
    count = workers(args, markexpr, _cores())
    if count:
        args[:] = [*args, "-n", str(count)]
