"""Shared test fixtures: async tests run under anyio on asyncio; under CI (`CI` set, as
`.ci/run` does) every hypothesis property test is derandomised and has no per-example
deadline, so a CI run is repeatable and a loaded machine cannot fail it by being slow."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import lanes
from tests.pg import PgServer, find_bindir
from tests.spawning import mark_spawning

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fast",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # a property test that names no max_examples draws the fast lane's share of the default
    max_examples=max(10, settings.get_profile("default").max_examples // lanes.FAST_SHARE),
)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    """The fast lane (`-m "not slow"`) draws fewer, derandomised examples (tests/lanes.py)."""
    if lanes.deselects_slow(config.option.markexpr or ""):
        lanes.FAST = True
        settings.load_profile("fast")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_state_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commands keep sessions under $XDG_STATE_HOME and read credentials from
    $XDG_CONFIG_HOME by default; keep tests out of ~ (a developer's saved key included)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A real PostgreSQL for the whole run (see tests/pg.py); skipped, loudly, only when the
    server binaries are not installed."""
    bindir = find_bindir()
    if bindir is None:
        message = (
            "PostgreSQL server binaries (initdb, pg_ctl) are not installed: the PostgreSQL"
            " store tests are SKIPPED; install the Debian package postgresql"
        )
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    server = PgServer(bindir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of an empty database of its own on the test PostgreSQL."""
    return pg_server.database()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Process-spawning tests are `slow` without a hand-written marker (tests/spawning.py)."""
    mark_spawning(items)
