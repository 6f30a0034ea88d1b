"""`QualitySettings` (`runtime/model_quality/quality_settings.py`): the typed value the
quality guards read. `active_for(route)` turns the guards on for `openai:` routes only in
`auto` mode, for every route with `on`, for none with `off`; the defaults are the documented
limits; the value is frozen, so a running turn's guards cannot change under it."""

from __future__ import annotations

import dataclasses

import pytest

from steerable_bridge.runtime.model_quality import quality
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings


@pytest.mark.parametrize(
    ("mode", "route", "active"),
    [
        ("auto", "openai:gpt-4o", True),
        ("auto", "openai:", True),
        ("auto", "anthropic:claude", False),
        ("auto", "test:openai:x", False),  # the provider is the first part of the route
        ("on", "anthropic:claude", True),
        ("on", "openai:gpt-4o", True),
        ("off", "openai:gpt-4o", False),
    ],
)
def test_the_mode_decides_which_routes_the_guards_run_for(
    mode: str, route: str, active: bool
) -> None:
    assert QualitySettings(mode=mode).active_for(route) is active  # type: ignore[arg-type]


def test_the_defaults_are_the_documented_limits() -> None:
    settings = QualitySettings()
    assert settings.mode == "auto" and settings.recover_tool_calls and settings.dedup
    assert (settings.dedup_limit, settings.error_breaker, settings.completion_retries) == (3, 3, 2)
    assert (settings.soft_timeout_s, settings.max_tool_calls) == (300.0, 100)
    assert settings.max_turn_tokens is None and settings.tool_budget is None
    assert settings.narrate_empty


def test_the_settings_are_frozen_and_keyword_only() -> None:
    settings = QualitySettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.mode = "off"  # type: ignore[misc]
    with pytest.raises(TypeError):
        QualitySettings("on")  # type: ignore[misc]


def test_the_guards_module_hands_out_the_same_type() -> None:
    assert quality.QualitySettings is QualitySettings
