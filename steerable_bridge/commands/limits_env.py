"""Memory and tool-output limits from the environment, for every command that builds an agent.

`STEERABLE_SESSION_CACHE` (idle sessions and AG-UI threads kept in memory, default 256) and
`STEERABLE_SESSION_TTL` (seconds an idle one is kept, default 600) bound what a long-running
process holds; a forgotten session reloads from the store when used. `STEERABLE_TOOL_OUTPUT_LINES`
(default 2,000) and `STEERABLE_TOOL_OUTPUT_BYTES` (default 50,000) are the largest tool
result the model sees before it is cut in the middle (`runtime/bounding.py`). A bad value is
a `ValueError` naming the variable and what it accepts; the commands report it as a
`ConfigError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from steerable_bridge.runtime.agent import AgentConfig
from steerable_bridge.runtime.bounding import OutputLimits

__all__ = ["Limits", "limits_from_env"]

MIN_LINES = 10
MIN_BYTES = 1_000
"""Below these a cut result would be mostly its header."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The `AgentConfig` fields the environment sets."""

    max_sessions: int
    session_ttl_s: float
    output_limits: OutputLimits


def _whole(env: Mapping[str, str], name: str, default: int, least: int, what: str) -> int:
    raw = env.get(name, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < least:
        raise ValueError(f"{name}={env[name]!r} must be {what} (at least {least:,})")
    return int(raw)


def limits_from_env(env: Mapping[str, str] | None = None) -> Limits:
    """The limits the environment asks for; ValueError on a bad value."""
    env = os.environ if env is None else env
    default = AgentConfig()
    sessions = _whole(
        env, "STEERABLE_SESSION_CACHE", default.max_sessions, 1, "a whole number of sessions"
    )
    raw = env.get("STEERABLE_SESSION_TTL", "").strip()
    ttl = default.session_ttl_s
    if raw:
        try:
            ttl = float(raw)
        except ValueError:
            ttl = -1.0
        if not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(
                f"STEERABLE_SESSION_TTL={raw!r} must be a number of seconds above 0"
                " (for example 600)"
            )
    lines = _whole(
        env,
        "STEERABLE_TOOL_OUTPUT_LINES",
        default.output_limits.max_lines,
        MIN_LINES,
        "a whole number of lines",
    )
    size = _whole(
        env,
        "STEERABLE_TOOL_OUTPUT_BYTES",
        default.output_limits.max_bytes,
        MIN_BYTES,
        "a whole number of bytes",
    )
    return Limits(
        max_sessions=sessions,
        session_ttl_s=ttl,
        output_limits=OutputLimits(max_lines=lines, max_bytes=size),
    )
