"""The prompt-cache drift monitor: notices when a session's cache hit rate collapses.

A long session on a provider with prompt caching should see most of each prompt served
from the cache (`Usage.cached_tokens`); when the hit rate drops and stays down, the cached
prefix broke — history was rewritten, the tool list changed, or the cache lifetime ran
out — and every step now pays full price. `CacheDriftMonitor.observe(usage)` is called by
the loop after each model response. It arms the first time a response shows the cache
serving tokens (providers without cache accounting never arm it), ignores prompts too short
for caching to matter, and returns a verdict when the hit rate stays below
`min_hit_rate` for `consecutive_steps` steps in a row — one low step is normal after a
compaction re-warms the cache. It flags once per streak; a good step re-arms it. The loop
logs the verdict as a `hook_action` (`cache_drift` / `drift_detected`). One monitor lives
per session, so streaks span turns. Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from steerable_bridge.runtime.values import Usage

__all__ = ["CacheDriftMonitor", "DriftVerdict"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftVerdict:
    """A collapsed hit rate: how low, over how many steps, and what to do about it."""

    hit_rate: float
    steps: int
    prompt_tokens: int
    cached_tokens: int

    @property
    def detail(self) -> str:
        return (
            f"prompt-cache hit rate {self.hit_rate:.0%} ({self.cached_tokens:,} of"
            f" {self.prompt_tokens:,} prompt tokens) for {self.steps} steps in a row: the"
            " cached prefix broke (history rewritten, tool list changed or cache expired);"
            " keep tools stable within a session, or set STEERABLE_PROMPT_CACHE_TTL=1h for"
            " slow sessions"
        )


@dataclass(slots=True, kw_only=True)
class CacheDriftMonitor:
    """Watches one session's cache hit rate, step by step (see the module docstring)."""

    min_hit_rate: float = 0.5
    consecutive_steps: int = 3
    min_prompt_tokens: int = 4096
    armed: bool = False
    low_steps: int = 0

    def observe(self, usage: Usage) -> DriftVerdict | None:
        """Fold in one model response; the verdict when this step completes a low streak."""
        if usage.cached_tokens > 0:
            self.armed = True
        if not self.armed or usage.prompt_tokens < self.min_prompt_tokens:
            return None
        rate = usage.cached_tokens / usage.prompt_tokens
        if rate >= self.min_hit_rate:
            self.low_steps = 0
            return None
        self.low_steps += 1
        if self.low_steps != self.consecutive_steps:
            return None
        verdict = DriftVerdict(
            hit_rate=rate,
            steps=self.low_steps,
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
        )
        logger.warning("%s", verdict.detail)
        return verdict
