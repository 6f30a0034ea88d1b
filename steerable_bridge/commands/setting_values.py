"""How one environment variable's text becomes a setting's value, for `settings.py`.

Each function here is a parser `(name, text) -> value` that a settings field names through
`Parse(...)` in its type; it raises `ValueError` with the one line the CLI prints for a bad
value: the variable, the value as given, and what to set instead. The wording is the one
the commands used before the settings model existed, so scripts and tests that match it
keep working. Blank text means "unset" where the old readers treated it so (whole numbers,
the session TTL, the token counts), and is a bad value where they did not. Nothing here
reads the environment; `settings.py` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Parse",
    "cache_ttl",
    "choice",
    "flag_seconds",
    "flag_whole",
    "milliseconds",
    "names",
    "optional_text",
    "run_count",
    "seconds_above_zero",
    "share",
    "steps",
    "switch",
    "text",
    "tokens",
    "url",
    "whole",
    "workers",
]

Parser = Callable[[str, str], Any]


@dataclass(frozen=True, slots=True)
class Parse:
    """Type metadata naming a field's parser: `Annotated[int, Parse(whole(1, "..."))]`."""

    parse: Parser


def text(name: str, raw: str) -> str:
    """The text as given."""
    return raw


def optional_text(name: str, raw: str) -> str | None:
    """The text, or None when blank (as the old readers' `get(NAME) or default` had it)."""
    return raw or None


def names(name: str, raw: str) -> tuple[str, ...]:
    """`"a, b,,c"` → ("a", "b", "c"); set but blank is the empty tuple, not "unset"."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def choice(*allowed: str, fold: bool = False) -> Parser:
    """One of `allowed`: `NAME='x': use a, b or c`. With `fold` the text is lower-cased
    first and blank means unset."""
    listed = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"

    def parse(name: str, raw: str) -> str | None:
        value = raw.strip().lower() if fold else raw
        if fold and not value:
            return None
        if value not in allowed:
            raise ValueError(f"{name}={raw!r}: use {listed}")
        return value

    return parse


def switch(truthy: tuple[str, ...], falsy: tuple[str, ...], accepts: str) -> Parser:
    """A yes / no value among `truthy` and `falsy` (case-insensitive):
    `NAME='x' must be {accepts}`."""

    def parse(name: str, raw: str) -> bool:
        value = raw.strip().lower()
        if value not in truthy + falsy:
            raise ValueError(f"{name}={value!r} must be {accepts}")
        return value in truthy

    return parse


def whole(least: int, what: str) -> Parser:
    """A whole number of at least `least` (`_` allowed as a digit separator), None when
    blank: `NAME='x' must be {what} (at least N)`."""

    def parse(name: str, raw: str) -> int | None:
        digits = raw.strip().replace("_", "")
        if not digits:
            return None
        if not digits.isdigit() or int(digits) < least:
            raise ValueError(f"{name}={raw!r} must be {what} (at least {least:,})")
        return int(digits)

    return parse


def seconds_above_zero(name: str, raw: str) -> float | None:
    """Seconds above 0, None when blank (`STEERABLE_SESSION_TTL`)."""
    value = raw.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name}={value!r} must be a number of seconds above 0 (for example 600)")
    return seconds


def positive_seconds(raw: object, flag: str, env: str) -> float:
    """`raw` (an option's or variable's text) as seconds above 0; ValueError naming the
    flag and the variable otherwise (options and variables share it: `model_deadlines.py`,
    `serve_limits.py`)."""
    text = str(raw).strip()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{flag} / {env}={text!r} must be a number of seconds above 0 (for example 120)"
        )
    return value


def flag_seconds(flag: str) -> Parser:
    """Seconds above 0 for a variable that is `flag`'s default: the message names both."""

    def parse(name: str, raw: str) -> float:
        return positive_seconds(raw, flag, name)

    return parse


def flag_whole(flag: str, least: int) -> Parser:
    """A whole number of at least `least` for a variable that is `flag`'s default; None
    when blank."""

    def parse(name: str, raw: str) -> int | None:
        digits = raw.strip().replace("_", "")
        if not digits:
            return None
        if not digits.isdigit() or int(digits) < least:
            raise ValueError(f"{flag} / {name}={raw!r} must be a whole number, at least {least:,}")
        return int(digits)

    return parse


def run_count(name: str, raw: str) -> int:
    """`STEERABLE_MAX_RUNS`: a whole number of runs, 0 for no limit."""
    value = raw.strip()
    try:
        runs = int(value)
    except ValueError:
        runs = -1
    if runs < 0:
        raise ValueError(
            f"--max-runs / {name}={value!r} is not a number of runs; give a whole"
            " number (0 = no limit)"
        )
    return runs


def workers(name: str, raw: str) -> int:
    """`STEERABLE_WORKERS`: a whole number of processes, 1 when blank."""
    value = raw.strip()
    if not value:
        return 1
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"--workers / {name}={value!r} is not a number of processes; give a whole number"
            " such as 2"
        ) from None


def milliseconds(name: str, raw: str) -> float:
    """A number of milliseconds (`STEERABLE_DEMO_PACE_MS`)."""
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number of milliseconds") from None


def share(name: str, raw: str) -> float:
    """A share of the context window between 0.1 and 1.0."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 1.0:
        raise ValueError(
            f"{name}={raw!r} must be a share of the window between 0.1 and 1.0 (for example 0.8)"
        )
    return value


def steps(name: str, raw: str) -> int:
    """A whole number of steps, 0 for off."""
    if not raw.strip().isdigit():
        raise ValueError(f"{name}={raw!r} must be a whole number of steps (0: off)")
    return int(raw)


def tokens(minimum: int, remedy: str = "") -> Parser:
    """A whole number of tokens of at least `minimum`, None when blank; the wording of the
    HTTP providers' own reader (`adapters/llm/window.tokens_from_env`)."""

    def parse(name: str, raw: str) -> int | None:
        value = raw.strip()
        if not value:
            return None
        try:
            count = int(value)
        except ValueError:
            count = minimum - 1
        if count < minimum:
            bound = "above zero" if minimum == 1 else f"of at least {minimum}"
            raise ValueError(f"{name}={value!r} is not a whole number of tokens {bound}{remedy}")
        return count

    return parse


def url(example: str) -> Parser:
    """An http(s) URL with a host (trailing `/` dropped), None when blank."""

    def parse(name: str, raw: str) -> str | None:
        value = raw.strip().rstrip("/")
        if not value:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{name}={raw!r} is not an http(s) URL; set it to one such as {example},"
                " or unset it"
            )
        return raw

    return parse


def cache_ttl(name: str, raw: str) -> str:
    """`5m` (also when blank) or `1h`, case-insensitive."""
    value = raw.strip().lower() or "5m"
    if value not in ("5m", "1h"):
        raise ValueError(f"{name}={value!r} must be 5m (the default) or 1h")
    return value
