"""The agent runtime: the loop, the LoopEvent taxonomy, sessions, tools and ports.

Re-exported here is the public hook API (see `hooks.py`) and the quality settings (see
`quality.py`): register a `Hook` on `Agent.hooks`, or expose `HOOKS` from a
`--hooks-module` file. The names load on first use, so importing one runtime module (the
CLI does, before answering an editor's `initialize`) does not import them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from steerable_bridge.runtime.hooks import (
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
    from steerable_bridge.runtime.quality import QualitySettings

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

_HOME = {name: "hooks" for name in __all__} | {"QualitySettings": "quality"}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
