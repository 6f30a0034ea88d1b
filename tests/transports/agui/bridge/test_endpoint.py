"""The endpoint's settings: headers as users write them, the route it is known by, and URLs
or timeouts that cannot work refused with the remedy."""

from __future__ import annotations

import pytest

from steerable_bridge.transports.agui.bridge import EndpointSettings, parse_header


def test_headers_parse_as_users_write_them() -> None:
    assert parse_header("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    assert parse_header("  X-Key :v ") == ("X-Key", "v")
    for bad in ("NoColon", ": value", "Bad Name: v"):
        with pytest.raises(ValueError, match="Name: value"):
            parse_header(bad)


def test_the_route_names_the_endpoint() -> None:
    assert EndpointSettings(url="http://127.0.0.1:8000/agent").route == "agui:127.0.0.1:8000/agent"
    assert EndpointSettings(url="https://agents.example.com/").route == "agui:agents.example.com"


@pytest.mark.parametrize("url", ["127.0.0.1:8000/agent", "ftp://host/agent", "http://"])
def test_a_url_that_cannot_be_posted_to_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        EndpointSettings(url=url)


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        EndpointSettings(url="http://h/agent", idle_timeout_s=0)
