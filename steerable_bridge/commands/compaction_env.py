"""Compaction settings from the settings model, for every command that builds an agent.

`STEERABLE_COMPACTION` (`1` / `0`) turns the automatic triggers on or off,
`STEERABLE_COMPACT_THRESHOLD` (a share of the context window, default 0.8) sets where
pressure compaction fires, and `STEERABLE_COMPACT_MICRO_EVERY` (steps, default 0 = off)
turns on the periodic fold of old tool results. The variables are fields of
`settings.SessionSettings`, which validates them (a bad value names the variable and what
it accepts); `compaction_from_settings` makes the runtime's `CompactionSettings` of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from steerable_bridge.commands.settings import SessionSettings
from steerable_bridge.runtime.model_context.compaction import CompactionSettings

__all__ = ["compaction_from_env", "compaction_from_settings"]


def compaction_from_settings(settings: SessionSettings) -> CompactionSettings:
    """The compaction settings the session settings ask for."""
    return CompactionSettings(
        enabled=settings.compaction,
        threshold=settings.compact_threshold,
        micro_every=settings.compact_micro_every,
    )


def compaction_from_env(env: Mapping[str, str] | None = None) -> CompactionSettings:
    """The compaction settings `env` (the process environment when None) asks for; a
    `ValueError` (`SettingsError`) naming each bad variable."""
    return compaction_from_settings(SessionSettings.load(env))
