"""The connection budget `serve` derives from the file-descriptor limit."""

from __future__ import annotations

import resource

from steerable_bridge.transports.agui.head_guard import ConnectionLimits, connection_budget


def test_the_budget_leaves_room_for_the_accept_burst_and_the_process() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = connection_budget(ConnectionLimits())
    assert budget.fd_limit == soft or soft == resource.RLIM_INFINITY
    assert budget.max_connections + budget.backlog < budget.fd_limit
    assert 16 <= budget.backlog <= 2048


def test_an_explicit_cap_that_does_not_fit_is_lowered() -> None:
    fits = connection_budget(ConnectionLimits())
    asked = connection_budget(ConnectionLimits(max_connections=fits.max_connections + 10**6))
    assert asked.max_connections < fits.max_connections + 10**6
    assert connection_budget(ConnectionLimits(max_connections=3)).max_connections == 3
