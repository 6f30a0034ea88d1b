"""Which model-quality guards run and their limits: the typed value the runtime receives.

`QualitySettings` is what `quality.py`'s `TurnGuard` reads. The runtime never parses text:
the `--quality` / `STEERABLE_QUALITY` mini-language belongs to the commands
(`commands/quality_flag.py`), which hand over this value. Kept apart from the guards so a
command can check a spec before it serves without importing the event taxonomy (`acp`
answers `initialize` first). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["QualityMode", "QualitySettings"]

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
