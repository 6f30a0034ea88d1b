"""`--quality` text becomes the runtime's `QualitySettings`; a bad item names the remedy."""

from __future__ import annotations

import re

import pytest

from steerable_bridge.commands.quality_flag import parse_quality
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings


def test_modes_and_items_set_the_fields_they_name() -> None:
    assert parse_quality("") == QualitySettings()
    settings = parse_quality("on, dedup=off, breaker=5, soft_timeout=120, max_tool_calls=50")
    assert (settings.mode, settings.dedup, settings.error_breaker) == ("on", False, 5)
    assert (settings.soft_timeout_s, settings.max_tool_calls) == (120.0, 50)
    assert parse_quality("OFF,Narrate=No").mode == "off"
    assert parse_quality("OFF,Narrate=No").narrate_empty is False


def test_the_tool_budget_is_configurable() -> None:
    assert parse_quality("tool_budget=500").tool_budget == 500


def test_off_lifts_a_limit_and_base_keeps_the_rest() -> None:
    settings = parse_quality("soft_timeout=off,max_tokens=none,max_tool_calls=off")
    assert (settings.soft_timeout_s, settings.max_turn_tokens, settings.max_tool_calls) == (
        None,
        None,
        None,
    )
    base = QualitySettings(mode="on", dedup_limit=7)
    assert parse_quality("retries=4", base) == QualitySettings(
        mode="on", dedup_limit=7, completion_retries=4
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dedupe=off", "unknown quality setting 'dedupe=off'; use one of: auto, on, off, "),
        ("sometimes", "unknown quality setting 'sometimes'"),
        ("dedup=maybe", "quality setting dedup takes on or off, not 'maybe'"),
        ("breaker=many", "quality setting breaker takes a number, not 'many'"),
        ("max_tool_calls=0", "quality setting max_tool_calls must be positive (or off)"),
        ("soft_timeout=-1", "quality setting soft_timeout must be positive (or off)"),
    ],
)
def test_a_bad_item_is_named_with_what_is_accepted(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_quality(spec)


def test_a_json_object_sets_the_fields_it_names_and_base_keeps_the_rest() -> None:
    assert parse_quality('{"mode": "on", "max_tool_calls": 1}') == QualitySettings(
        mode="on", max_tool_calls=1
    )
    base = QualitySettings(mode="on", dedup_limit=7)
    assert parse_quality(' {"soft_timeout_s": 0, "max_turn_tokens": null}', base) == (
        QualitySettings(mode="on", dedup_limit=7, soft_timeout_s=0.0, max_turn_tokens=None)
    )
    assert parse_quality("{}") == QualitySettings()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ('{"max_tools": 1}', "unknown quality field 'max_tools'; use one of: mode, "),
        ('{"dedup": "on"}', 'quality field dedup: Input should be a valid boolean, not "on"'),
        ('{"mode": "sometimes"}', "quality field mode: Input should be 'auto', 'on' or 'off'"),
        ('{"max_tool_calls": 1.5}', "quality field max_tool_calls: Input should be a valid"),
        ('{"error_breaker": -1}', "quality field error_breaker must not be negative, not -1"),
        ("{mode: on}", "quality JSON does not parse: "),
    ],
)
def test_a_bad_json_field_is_named_with_what_is_accepted(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_quality(spec)
