"""Memory and tool-output limits from the settings, for every command that builds an agent.

`STEERABLE_SESSION_CACHE` (idle sessions and AG-UI threads kept in memory, default 256) and
`STEERABLE_SESSION_TTL` (seconds an idle one is kept, default 600) bound what a long-running
process holds; a forgotten session reloads from the store when used. `STEERABLE_TOOL_OUTPUT_LINES`
(default 2,000) and `STEERABLE_TOOL_OUTPUT_BYTES` (default 50,000) are the largest tool
result the model sees before it is cut in the middle (`runtime/tool_calls/bounding.py`). The
variables are fields of `settings.SessionSettings`, which validates them (a bad value names the
variable and what it accepts); `limits_from_settings` turns them into the `AgentConfig`
fields they set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from steerable_bridge.commands.settings import SessionSettings
from steerable_bridge.runtime.tool_calls.bounding import OutputLimits

__all__ = ["Limits", "limits_from_env", "limits_from_settings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The `AgentConfig` fields the environment sets."""

    max_sessions: int
    session_ttl_s: float
    output_limits: OutputLimits


def limits_from_settings(settings: SessionSettings) -> Limits:
    """The limits the session settings ask for."""
    return Limits(
        max_sessions=settings.session_cache,
        session_ttl_s=settings.session_ttl,
        output_limits=OutputLimits(
            max_lines=settings.tool_output_lines, max_bytes=settings.tool_output_bytes
        ),
    )


def limits_from_env(env: Mapping[str, str] | None = None) -> Limits:
    """The limits `env` (the process environment when None) asks for; a `ValueError`
    (`SettingsError`) naming each bad variable."""
    return limits_from_settings(SessionSettings.load(env))
