"""The agent runtime: the loop, the LoopEvent taxonomy, sessions, tools and ports.

Here sit the LoopEvent taxonomy (`events.py`), the immutable values (`values.py`) and
the coded-error base (`errors.py`); everything else lives in a room named for its
concept: `turns/` (the loop and one turn), `tool_calls/` (from a call to its result),
`agent_sessions/` (the agent, sessions, routing), `session_log/` (the log, replay,
recovery), `ports/` (the contracts adapters and transports implement),
`model_context/` (projection, tokens, compaction), `model_quality/` (guards, and tool
calls written as text) and `encoding/` (event JSON, strict JSON, surrogates).

Re-exported here is the public hook API (see `hooks.py`) and the quality settings (see
`quality.py`): register a `Hook` on `Agent.hooks`, or expose `HOOKS` from a
`--hooks-module` file. The names load on first use, so importing one runtime module (the
CLI does, before answering an editor's `initialize`) does not import them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from steerable_bridge.runtime.model_quality.quality import QualitySettings
    from steerable_bridge.runtime.turns.hooks import (
        Accept,
        Hook,
        HookContext,
        Narrate,
        Reject,
        Retry,
        Rewrite,
        StepReport,
        Veto,
    )

__all__ = [
    "Accept",
    "Hook",
    "HookContext",
    "Narrate",
    "QualitySettings",
    "Reject",
    "Retry",
    "Rewrite",
    "StepReport",
    "Veto",
]

_HOME = {name: "turns.hooks" for name in __all__} | {"QualitySettings": "model_quality.quality"}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
