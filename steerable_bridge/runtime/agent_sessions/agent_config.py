"""`AgentConfig`, the settings every session of one agent process shares, and `new_id`.

`Agent` (`agent.py`) is built with one and re-exports both names; a session (`session.py`)
reads its settings from it. It lives apart from `agent.py` so that a session can name the
settings type without importing the agent that makes sessions. It holds values only: no I/O,
no state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from steerable_bridge.runtime.model_context.compaction import CompactionSettings
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.permissions import Approval
from steerable_bridge.runtime.tool_calls.bounding import OutputLimits
from steerable_bridge.runtime.turns.turn import LoopSettings
from steerable_bridge.runtime.values import Advisory

__all__ = ["AgentConfig", "new_id"]


def new_id(prefix: str) -> str:
    """A fresh, unique id such as `msg_3f2a9c1b7d4e`."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Settings shared by every session of one agent process."""

    model: str = "demo:default"
    approval: Approval = "ask"
    loop: LoopSettings = field(default_factory=lambda: LoopSettings(new_id=new_id))
    quality: QualitySettings = QualitySettings()
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    output_limits: OutputLimits = OutputLimits()
    """The largest tool result text the model sees; longer ones are cut in the middle."""
    max_sessions: int = 256
    """Idle sessions kept in memory beyond this many are forgotten (oldest first) and
    reloaded from the store when used again."""
    session_ttl_s: float = 600.0
    """An idle session unused this long is forgotten too."""
    advisories: tuple[Advisory, ...] = ()
    """What every session tells its user once, as `notice` events in its first turn in this
    process (the CLI: commands run without a sandbox)."""
