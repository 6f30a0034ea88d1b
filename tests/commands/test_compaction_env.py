"""Compaction settings read from the environment."""

from __future__ import annotations

import pytest

from steerable_bridge.commands.compaction_env import compaction_from_env


def test_defaults_and_overrides() -> None:
    default = compaction_from_env({})
    assert default.enabled and default.threshold == 0.8 and default.micro_every == 0
    custom = compaction_from_env(
        {
            "STEERABLE_COMPACTION": "0",
            "STEERABLE_COMPACT_THRESHOLD": "0.6",
            "STEERABLE_COMPACT_MICRO_EVERY": "5",
        }
    )
    assert not custom.enabled and custom.threshold == 0.6 and custom.micro_every == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STEERABLE_COMPACTION", "maybe"),
        ("STEERABLE_COMPACT_THRESHOLD", "2"),
        ("STEERABLE_COMPACT_THRESHOLD", "lots"),
        ("STEERABLE_COMPACT_MICRO_EVERY", "-1"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        compaction_from_env({name: value})
