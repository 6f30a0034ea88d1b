"""Prompt-cache shaping: where a Messages-API request asks the provider to cache its prefix.

Anthropic caches a prompt prefix only up to explicit `cache_control` breakpoints, so the
placement is deliberate: three anchors per request — the system prompt, the last tool
definition and the tail of the transcript (the last block of the last turn that may carry
one) — recomputed from the finished request body every call, so a tool added mid-session
simply moves the tool anchor on the next request and no stale anchor can linger. A request
marked one-off (`ModelRequest.one_off`, such as a compaction summary of a transcript about
to be dropped) gets no anchors: writing it to the cache costs extra and is never read.
`STEERABLE_PROMPT_CACHE_TTL=1h` opts every anchor into the one-hour cache (default five
minutes); `STEERABLE_PROMPT_CACHE=off` places none, for debugging. OpenAI-compatible
servers cache prefixes implicitly, so only the Anthropic adapter uses this module. Pure
data: takes a body, returns a new one (copying only what it marks), never mutates its input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from steerable_bridge.runtime.agent_sessions.routing import RouteError

__all__ = ["CachePolicy", "cache_policy_from_env", "place_anchors"]

_NO_ANCHOR = frozenset({"thinking", "redacted_thinking"})
"""Block types the API does not let carry `cache_control`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePolicy:
    """Whether to place anchors and with which lifetime."""

    enabled: bool = True
    ttl: Literal["5m", "1h"] = "5m"

    def marker(self) -> dict[str, str]:
        """The `cache_control` value one anchor carries."""
        if self.ttl == "1h":
            return {"type": "ephemeral", "ttl": "1h"}
        return {"type": "ephemeral"}


def cache_policy_from_env(env: Mapping[str, str]) -> CachePolicy:
    """`STEERABLE_PROMPT_CACHE` (on / off) and `STEERABLE_PROMPT_CACHE_TTL` (5m / 1h)."""
    switch = env.get("STEERABLE_PROMPT_CACHE", "on").strip().lower()
    if switch not in ("on", "off", "1", "0", "true", "false"):
        raise RouteError("invalid_setting", f"STEERABLE_PROMPT_CACHE={switch!r} must be on or off")
    ttl = env.get("STEERABLE_PROMPT_CACHE_TTL", "5m").strip().lower() or "5m"
    if ttl not in ("5m", "1h"):
        raise RouteError(
            "invalid_setting",
            f"STEERABLE_PROMPT_CACHE_TTL={ttl!r} must be 5m (the default) or 1h",
        )
    return CachePolicy(enabled=switch in ("on", "1", "true"), ttl="1h" if ttl == "1h" else "5m")


def place_anchors(body: Mapping[str, Any], policy: CachePolicy, *, one_off: bool) -> dict[str, Any]:
    """A copy of a Messages request body with the cache anchors this request should carry.

    Only the blocks that get an anchor (and the lists holding them) are copied; the rest of
    the body is shared with the input, which is never changed."""
    shaped = dict(body)
    if not policy.enabled or one_off:
        return shaped
    marker = policy.marker()
    for key in ("system", "tools"):
        blocks = shaped.get(key)
        if isinstance(blocks, list) and blocks:
            shaped[key] = [*blocks[:-1], {**blocks[-1], "cache_control": dict(marker)}]
    turns = list(shaped.get("messages") or ())
    for t in range(len(turns) - 1, -1, -1):
        content = list(turns[t].get("content") or ())
        i = next(
            (
                i
                for i in range(len(content) - 1, -1, -1)
                if content[i].get("type") not in _NO_ANCHOR
            ),
            None,
        )
        if i is not None:
            content[i] = {**content[i], "cache_control": dict(marker)}
            turns[t] = {**turns[t], "content": content}
            shaped["messages"] = turns
            break
    return shaped
