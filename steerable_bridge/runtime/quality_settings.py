"""`--quality`: which model-quality guards run and their limits, and the parser of the spec.

`QualitySettings` is the value `quality.py`'s `TurnGuard` reads; `parse_quality(spec)` turns
`--quality` / `STEERABLE_QUALITY` text (`auto`, `on`, `off`, `NAME=VALUE` items) into one,
raising ValueError naming the bad item. Kept apart from the guards so a command can refuse a
bad spec before it serves without importing the event taxonomy (`acp` answers `initialize`
first). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = ["QualityMode", "QualitySettings", "parse_quality"]

QualityMode = Literal["auto", "on", "off"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QualitySettings:
    """Which model-quality mechanisms run, and their limits (None or 0 turns one off)."""

    mode: QualityMode = "auto"
    """`auto`: on for `openai:` routes only; `on`: every route; `off`: none (hooks still run)."""
    recover_tool_calls: bool = True
    """Recover tool calls a model writes as text (see `pseudo_calls.py`)."""
    dedup: bool = True
    dedup_limit: int = 3
    """Dedups in one turn after which the next step offers no tools (0: never)."""
    error_breaker: int = 3
    """Consecutive failed tool calls that skip the rest of the batch (0: off)."""
    soft_timeout_s: float | None = 300.0
    """Seconds after which the turn wraps up at the next step boundary (None: off)."""
    max_tool_calls: int | None = 100
    """Tool calls one turn may run (None: no limit)."""
    max_turn_tokens: int | None = None
    """Prompt plus completion tokens one turn may use (None: no limit)."""
    completion_retries: int = 2
    """How often per turn `before_completion` hooks may ask for another step."""
    narrate_empty: bool = True
    """A turn that used tools and ends with an empty answer is asked to narrate once."""
    tool_budget: int | None = None
    """Schema tokens MCP (`auto`) tools may fill before the rest go behind `tool_search`
    (None: a tenth of the model's context window; see `exposure.py`)."""

    def active_for(self, route: str) -> bool:
        """Whether the mechanisms run for a model route."""
        if self.mode == "auto":
            return route.startswith("openai:")
        return self.mode == "on"


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
