"""`--quality`: the parser that turns the flag's text into the runtime's `QualitySettings`.

`parse_quality(spec)` reads `--quality` / `STEERABLE_QUALITY` text (`auto`, `on`, `off`, and
`NAME=VALUE` items, comma separated) and returns a `QualitySettings`; a bad item raises
ValueError naming it and what is accepted, which `build_agent` and `acp` turn into a
`ConfigError`. The commands own this mini-language so the runtime only ever receives the
typed value; it imports nothing heavier than `runtime/model_quality/quality_settings.py`, so
`acp` can refuse a bad spec before it answers `initialize`. Pure: no I/O (the flag's default is set
in `common.py`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings

__all__ = ["parse_quality"]

_OPTIONS: dict[str, tuple[str, str]] = {
    "recover": ("recover_tool_calls", "bool"),
    "tool_budget": ("tool_budget", "limit"),
    "dedup": ("dedup", "bool"),
    "dedup_limit": ("dedup_limit", "int"),
    "breaker": ("error_breaker", "int"),
    "soft_timeout": ("soft_timeout_s", "seconds"),
    "max_tool_calls": ("max_tool_calls", "limit"),
    "max_tokens": ("max_turn_tokens", "limit"),
    "retries": ("completion_retries", "int"),
    "narrate": ("narrate_empty", "bool"),
}
"""The names `parse_quality` accepts, the field each sets, and the kind of value."""

_TRUE = frozenset({"on", "true", "yes", "1"})
_FALSE = frozenset({"off", "false", "no", "0"})


def parse_quality(spec: str, base: QualitySettings | None = None) -> QualitySettings:
    """Settings from `--quality` text: a mode and/or NAME=VALUE items, comma separated.

    `on`, `off`, `auto`; `dedup=off`, `breaker=5`, `soft_timeout=120` (seconds, `off`),
    `max_tool_calls=50`, `max_tokens=200000` (`off` = no limit), `recover=off`, ...
    Raises ValueError naming the bad item and the accepted ones.
    """
    settings = base or QualitySettings()
    changes: dict[str, Any] = {}
    for raw in spec.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item in ("auto", "on", "off"):
            changes["mode"] = item
            continue
        name, sep, value = item.partition("=")
        if not sep or name not in _OPTIONS:
            known = ", ".join(["auto", "on", "off", *(f"{n}=..." for n in _OPTIONS)])
            raise ValueError(f"unknown quality setting {raw.strip()!r}; use one of: {known}")
        field_name, kind = _OPTIONS[name]
        changes[field_name] = _value(name, kind, value)
    return replace(settings, **changes)


def _value(name: str, kind: str, value: str) -> Any:
    if kind == "bool":
        if value in _TRUE | _FALSE:
            return value in _TRUE
        raise ValueError(f"quality setting {name} takes on or off, not {value!r}")
    if kind in ("seconds", "limit") and value in ("off", "no", "false", "none"):
        return None
    try:
        number = float(value) if kind == "seconds" else int(value)
    except ValueError:
        raise ValueError(f"quality setting {name} takes a number, not {value!r}") from None
    if number < 0 or (kind == "limit" and number == 0):
        raise ValueError(f"quality setting {name} must be positive (or off), not {value!r}")
    return number
