"""The data of one turn: what starts it, what it may use, how it ended, where events go.

`TurnInput` is what a transport hands `Session.prompt`: the user's message and, for AG-UI,
answers to calls an earlier run left open (frontend tool results, approvals), the client's
shared state and its own tools. `TurnContext` is everything the loop borrows from the
session for one turn; `LoopSettings` bounds every wait; `RunOutcome` is the result a
transport turns into its wire's ending; `EventSink` and `Emit` say where a turn's events go
(the caller's sink, and the turn's own log-then-sink). Plain data, no behaviour, every value
frozen: `TurnContext`'s fields are never reassigned, though what some of them hold (the
session's log, facts, input queues, compactor and monitors) changes as the turn runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from steerable_bridge.runtime.events import EventBase, LoopEvent, StopReason
from steerable_bridge.runtime.model_context.cache_drift import CacheDriftMonitor
from steerable_bridge.runtime.model_context.compaction import Compactor
from steerable_bridge.runtime.model_context.projection import SessionFacts
from steerable_bridge.runtime.model_context.tokens import RequestEstimator, TokenCalibration
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.ports.permissions import PermissionPolicy
from steerable_bridge.runtime.ports.questions import QuestionAnswer, Questions
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.tool_calls.approvals import ApprovalMemory
from steerable_bridge.runtime.tool_calls.bounding import OutputLimits, Spill
from steerable_bridge.runtime.tool_calls.exposure import ToolShelf
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.hooks import Hook
from steerable_bridge.runtime.turns.steering import InputQueue
from steerable_bridge.runtime.values import Advisory, ContentPart, ToolContent, Usage

__all__ = [
    "ClientToolResult",
    "Emit",
    "EventSink",
    "LoopSettings",
    "QuestionReply",
    "ResumeDecision",
    "RunOutcome",
    "TurnContext",
    "TurnEngine",
    "TurnInput",
]

EventSink = Callable[[LoopEvent], Awaitable[None]]
"""Where the loop sends each event after logging it (a transport's renderer + writer)."""

E = TypeVar("E", bound=EventBase)


class Emit(Protocol):
    """Log an event of type `cls` in the running turn and hand it to the sink."""

    async def __call__(self, cls: type[E], /, **fields: Any) -> E: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientToolResult:
    """The client's answer to a frontend tool call (AG-UI tool message)."""

    call_id: str
    content: tuple[ToolContent, ...]
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeDecision:
    """The client's answer to an approval interrupt (AG-UI `resume[]`)."""

    call_id: str
    approved: bool
    stop: bool = False
    """Rejected, and the user asked to stop the turn (it ends `rejected`)."""
    always: bool = False
    """Keep the answer for this kind of call ("always allow / reject"), where the call has
    an approval key; otherwise it counts once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionReply:
    """The client's answer to a question an earlier run left open (AG-UI `resume[]`)."""

    question_id: str
    answer: QuestionAnswer


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """What starts a turn. Every field may be empty: a run may only answer open calls."""

    content: tuple[ContentPart, ...] = ()
    message_id: str | None = None
    tool_results: tuple[ClientToolResult, ...] = ()
    resume: tuple[ResumeDecision, ...] = ()
    answers: tuple[QuestionReply, ...] = ()
    """Answers to questions (`ask_user` calls) an earlier run left open."""
    state_json: str | None = None
    """Shared state the client sends (AG-UI `state`), logged as `state_snapshot`."""
    client_tools: tuple[Tool, ...] = ()
    """Tools the client runs itself for this turn (AG-UI `tools`)."""
    traceparent: str | None = None
    """The caller's W3C trace context (AG-UI `traceparent` header, ACP `_meta.traceparent`)."""
    compact: bool = False
    """Compact the history first (ACP `/compact`, AG-UI `command: "compact"`); a turn with
    nothing else to do ends right after the compaction, without a model call."""
    client_run_id: str | None = None
    """The id the client gave this run (AG-UI `runId`), logged with `run_started`."""
    parent_run_id: str | None = None
    """The client's parent run (AG-UI `parentRunId`), logged with `run_started`."""

    def run_started_fields(self) -> dict[str, str]:
        """What `run_started` logs of the client's run ids (none when it gave none)."""
        fields = {}
        if self.client_run_id is not None:
            fields["client_run_id"] = self.client_run_id
        if self.parent_run_id is not None:
            fields["parent_run_id"] = self.parent_run_id
        return fields


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    """Limits of one turn. Every wait the loop makes is bounded by one of these."""

    max_steps: int = 25
    model_timeout_s: float = 300.0
    permission_timeout_s: float = 300.0
    commit_interval_s: float = 0.25
    new_id: Callable[[str], str] = field(default=lambda prefix: prefix)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """How a turn ended: a stop reason, or a failure code and message."""

    run_id: str
    stop_reason: StopReason | None
    usage: Usage
    error_code: str | None = None
    error_message: str | None = None
    trace_id: str | None = None
    """The trace the run was recorded under (as in its `run_started`), when traced."""
    final_event: LoopEvent | None = None
    """The run's closing `run_finished` / `run_failed` as logged (seq, ts, usage), so a
    transport can carry it on its wire without reading the log; None only when the turn
    could not log one (the store refused it)."""
    notice: str = ""
    """A short word for the user about the turn that no event carries: why a `compact`
    turn folded nothing (its summary would not have been smaller); "" when there is none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnContext:
    """Everything one turn needs from its session, handed in by `Session.prompt`."""

    log: SessionLog
    facts: SessionFacts
    cwd: str
    model: str
    provider: ModelProvider
    system: str
    tools: tuple[Tool, ...]
    policy: PermissionPolicy
    environment: Environment | None
    steering: InputQueue
    follow_ups: InputQueue
    cancel: CancelToken
    sink: EventSink | None
    settings: LoopSettings
    compactor: Compactor | None = None
    """The session's compaction (breaker state outlives the turn); None: never compact."""
    output_limits: OutputLimits = OutputLimits()
    """The largest tool result text the model sees (`bounding.py`)."""
    spill: Spill | None = None
    """Keeps the full text of results cut to `output_limits`; None: the middle is lost."""
    snapshot: Callable[[], tuple[str, tuple[Tool, ...]]] | None = None
    """Called before every step: the system prompt and tools as registered now, so a change
    made during a step reaches the next one. None: `system` and `tools` hold for the turn."""
    hooks: tuple[Hook, ...] = ()
    """The hooks registered for the session when the turn started, in order."""
    quality: QualitySettings = QualitySettings(mode="off")
    """Which model-quality guards run (see `quality.py`)."""
    calibration: TokenCalibration | None = None
    """The process's token calibration: fed after each response that reports usage."""
    estimator: RequestEstimator = field(default_factory=RequestEstimator)
    """The session's request estimates (one per session, so a step estimates what is new)."""
    cache_drift: CacheDriftMonitor = field(default_factory=CacheDriftMonitor)
    """The session's prompt-cache drift monitor (one per session, so streaks span turns)."""
    trace_id: str | None = None
    """The W3C trace id this turn is traced under (see `observe.py`), or None."""
    approvals: ApprovalMemory | None = None
    """The project's remembered "always" answers (see `approvals.py`), or None."""
    shelf: ToolShelf | None = None
    """The session's tool tiers (see `exposure.py`); None: every tool is offered."""
    questions: Questions | None = None
    """How questions reach the person (see `questions.py`); None: nobody can be asked."""
    advisories: tuple[Advisory, ...] = ()
    """Logged as `notice` events right after `run_started` (the session's first turn)."""


TurnEngine = Callable[[TurnContext, TurnInput], Awaitable[RunOutcome]]
"""What runs one turn of a session: `loop.run_turn` (our model loop) by default; a bridge
supplies its own, which drives another agent and records what it says through the same
context (log, facts, sink), so claims, cancel, steering, replay and traces stay the same."""
