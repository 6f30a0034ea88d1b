"""`--quality`: the parser that turns the flag's text into the runtime's `QualitySettings`.

`parse_quality(spec)` reads `--quality` / `STEERABLE_QUALITY` text (`auto`, `on`, `off`, and
`NAME=VALUE` items, comma separated) and returns a `QualitySettings`; a bad item raises
ValueError naming it and what is accepted, which `build_agent` and `acp` turn into a
`ConfigError`. Text that starts with `{` is instead a JSON object of `QualitySettings`'
own fields (`{"mode": "on", "max_tool_calls": 1}`), for programs that hold the typed value
(the conformance runs): it is checked against the dataclass itself, so no field name is
restated anywhere. The commands own this mini-language so the runtime only ever receives the
typed value; it imports nothing heavier than `runtime/model_quality/quality_settings.py`, so
`acp` can refuse a bad spec before it answers `initialize`. Pure: no I/O (the flag's default is set
in `common.py`).
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
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
    Text starting with `{` is a JSON object of `QualitySettings` fields (see `_from_json`).
    Raises ValueError naming the bad item and the accepted ones.
    """
    settings = base or QualitySettings()
    if spec.lstrip().startswith("{"):
        return _from_json(spec, settings)
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


def _from_json(spec: str, settings: QualitySettings) -> QualitySettings:
    """`settings` with the fields a JSON object names set, each checked against its type.

    Strict JSON types (`true`, not `"on"`; `null` lifts a limit, `0` turns a count off as the
    dataclass says); an unknown field is refused with the list of known ones, a negative
    number with its name. Fields left out keep their value in `settings`."""
    from pydantic import TypeAdapter, ValidationError  # only for this form: acp starts light

    try:
        given: dict[str, Any] = json.loads(spec)  # an object: the text starts with `{`
    except json.JSONDecodeError as err:
        raise ValueError(f"quality JSON does not parse: {err}") from None
    known = [f.name for f in fields(QualitySettings)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"unknown quality field {unknown[0]!r}; use one of: {', '.join(known)}")
    try:
        parsed = TypeAdapter(QualitySettings).validate_json(spec, strict=True)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(
            f"quality field {where}: {first['msg']}, not {json.dumps(first['input'])}"
        ) from None
    for name in given:
        value = getattr(parsed, name)
        if not isinstance(value, bool) and isinstance(value, int | float) and value < 0:
            raise ValueError(f"quality field {name} must not be negative, not {value}")
    return replace(settings, **{name: getattr(parsed, name) for name in given})
