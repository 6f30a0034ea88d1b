"""Compaction settings from the environment, for every command that builds an agent.

`STEERABLE_COMPACTION` (`1` / `0`) turns the automatic triggers on or off,
`STEERABLE_COMPACT_THRESHOLD` (a share of the context window, default 0.8) sets where
pressure compaction fires, and `STEERABLE_COMPACT_MICRO_EVERY` (steps, default 0 = off)
turns on the periodic fold of old tool results. A bad value is a `ConfigError` naming the
variable and what it accepts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from steerable_bridge.runtime.compaction import CompactionSettings

__all__ = ["compaction_from_env"]


def compaction_from_env(env: Mapping[str, str] | None = None) -> CompactionSettings:
    """The compaction settings the environment asks for; ValueError on a bad value."""
    env = os.environ if env is None else env
    enabled = env.get("STEERABLE_COMPACTION", "1").strip().lower()
    if enabled not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"STEERABLE_COMPACTION={enabled!r} must be 1 or 0")
    raw = env.get("STEERABLE_COMPACT_THRESHOLD", "0.8")
    try:
        threshold = float(raw)
    except ValueError:
        threshold = -1.0
    if not 0.1 <= threshold <= 1.0:
        raise ValueError(
            f"STEERABLE_COMPACT_THRESHOLD={raw!r} must be a share of the window"
            " between 0.1 and 1.0 (for example 0.8)"
        )
    raw = env.get("STEERABLE_COMPACT_MICRO_EVERY", "0")
    if not raw.strip().isdigit():
        raise ValueError(
            f"STEERABLE_COMPACT_MICRO_EVERY={raw!r} must be a whole number of steps (0: off)"
        )
    return CompactionSettings(
        enabled=enabled in ("1", "true", "yes", "on"),
        threshold=threshold,
        micro_every=int(raw),
    )
