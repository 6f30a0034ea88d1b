"""Every coded error shares one base: a stable code, the message a user reads, the remedy."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.environment import WorkspaceError
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.model import ProviderError
from steerable_bridge.runtime.routing import RouteError
from steerable_bridge.runtime.storage import SessionNotFound, SessionOwned, StoreError
from steerable_bridge.runtime.strict_json import JsonRefused


def test_a_remedy_given_apart_ends_the_message() -> None:
    error = CodedError("storage_full", "the disk is full", "free some space")
    assert str(error) == error.message == "the disk is full; free some space"
    assert error.code == "storage_full" and error.remedy == "free some space"


def test_a_message_that_names_its_remedy_is_kept_as_written() -> None:
    error = RouteError("unknown_provider", "no provider 'x'; use openai:NAME")
    assert str(error) == "no provider 'x'; use openai:NAME" and error.remedy is None


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("rate_limited", "slow down; retry later", retryable=True),
        StoreError("storage_full", "full; free space"),
        SessionNotFound("s1"),
        SessionOwned("s1", "pid 7"),
        WorkspaceError("outside_workspace", "outside; use a path inside"),
        JsonRefused("invalid_json", "not JSON; send JSON"),
    ],
)
def test_each_layers_error_is_a_coded_error(error: CodedError) -> None:
    assert isinstance(error, CodedError) and error.code and str(error) == error.message


def test_refused_json_is_still_a_value_error() -> None:
    with pytest.raises(ValueError):
        raise JsonRefused("invalid_json", "not JSON; send JSON")
