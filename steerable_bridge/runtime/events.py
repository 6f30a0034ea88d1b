"""The LoopEvent taxonomy: everything a session does, as one typed, append-only stream.

Every variant is a frozen, slotted dataclass with a literal `kind` (the discriminator) and
the four fields every event carries: `session_id`, `run_id`, `seq` (strictly increasing per
session, assigned by the log on append) and `ts` (integer milliseconds since the epoch).
There is no untyped payload bag: each kind names its fields. The kind names are public API
(`steerable-bridge schema` prints them); transports render these events and the
conformance suite decodes the wires back into them. Serialisation lives in `codec.py`.

Groups, in the order a turn produces them:

- run: run_started, run_finished(stop_reason, usage), run_failed(code, message)
- step: step_started, step_finished, model_request, model_response
- text / reasoning: *_start(message_id), *_delta(message_id, delta), *_end(message_id)
- tool call (model side): tool_call_start, tool_call_delta, tool_call_end
- tool run (execution side): tool_started, tool_output, tool_finished
- permission: permission_requested, permission_resolved
- question: question_asked, question_answered, question_completed
- input: user_message, steer_applied, follow_up_applied
- state / plan: plan_updated, state_snapshot, state_delta
- session: mode_changed, config_changed, commands_updated, session_info, usage_updated
- control: hook_action, budget_exhausted, soft_timeout, compaction_started,
  compaction_summary_delta(compaction_id, delta), compaction, compaction_dropped
- notice: notice (live-only: logged, never replayed as history)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from steerable_bridge.runtime.ports.model import FinishReason, ModelRequest
from steerable_bridge.runtime.values import (
    Command,
    ContentPart,
    Interrupt,
    Location,
    NoticeSeverity,
    PermissionOption,
    PlanEntry,
    Sandbox,
    ToolContent,
    ToolError,
    ToolKind,
    Usage,
)

StopReason = Literal[
    "end_turn", "max_tokens", "max_steps", "refusal", "cancelled", "interrupted", "rejected"
]
"""Why a turn ended. `interrupted` means it waits for the client (frontend tool, approval);
`rejected` that the user rejected a tool call and asked to stop the turn."""

ToolStatus = Literal["completed", "failed", "cancelled"]
PermissionOutcome = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always", "cancelled"
]
ToolExecutor = Literal["backend", "frontend"]
QuestionMode = Literal["form", "url"]
"""How a question is answered: a form the client renders from a JSON schema, or a URL the
person opens out of band (ACP elicitation modes)."""
QuestionAction = Literal["accept", "decline", "cancel"]
"""The person's answer: `accept` (submitted the form / consented to open the URL),
`decline` (explicitly said no), `cancel` (dismissed it without choosing; also: nobody
answered in time, or the turn was cancelled)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventBase:
    """Fields every LoopEvent carries."""

    session_id: str
    run_id: str
    seq: int
    ts: int


# -- run ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(EventBase):
    kind: Literal["run_started"] = "run_started"
    model: str
    parent_run_id: str | None = None
    trace_id: str | None = None
    """The W3C trace id (32 hex digits) the run is traced under, when tracing is on."""
    client_run_id: str | None = None
    """The id the client gave the run (AG-UI `runId`), when it gave one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(EventBase):
    kind: Literal["run_finished"] = "run_finished"
    stop_reason: StopReason
    usage: Usage = Usage()
    pending_tool_call_ids: tuple[str, ...] = ()
    """Frontend tool calls the client must run and answer in its next run."""
    interrupts: tuple[Interrupt, ...] = ()
    """Approvals the client must give or refuse in its next run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(EventBase):
    kind: Literal["run_failed"] = "run_failed"
    code: str
    message: str


# -- step -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(EventBase):
    kind: Literal["step_started"] = "step_started"
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinished(EventBase):
    kind: Literal["step_finished"] = "step_finished"
    step: int
    finish_reason: FinishReason
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequestEvent(EventBase):
    kind: Literal["model_request"] = "model_request"
    step: int
    request: ModelRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponseEvent(EventBase):
    kind: Literal["model_response"] = "model_response"
    step: int
    finish_reason: FinishReason
    usage: Usage = Usage()
    model: str | None = None


# -- text and reasoning ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TextStart(EventBase):
    kind: Literal["text_start"] = "text_start"
    message_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(EventBase):
    kind: Literal["text_delta"] = "text_delta"
    message_id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TextEnd(EventBase):
    kind: Literal["text_end"] = "text_end"
    message_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningStart(EventBase):
    kind: Literal["reasoning_start"] = "reasoning_start"
    message_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta(EventBase):
    kind: Literal["reasoning_delta"] = "reasoning_delta"
    message_id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningEnd(EventBase):
    """The reasoning block is complete; a provider's seal over it, when it gave one."""

    kind: Literal["reasoning_end"] = "reasoning_end"
    message_id: str
    signature: str | None = None
    redacted_data: str | None = None
    """The whole block, encrypted by the provider (no deltas precede it)."""


# -- tool call, model side ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStart(EventBase):
    kind: Literal["tool_call_start"] = "tool_call_start"
    call_id: str
    name: str
    parent_message_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(EventBase):
    kind: Literal["tool_call_delta"] = "tool_call_delta"
    call_id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnd(EventBase):
    """The call is complete: its full argument text and how an editor should show it."""

    kind: Literal["tool_call_end"] = "tool_call_end"
    call_id: str
    name: str
    arguments_json: str
    tool_kind: ToolKind = "other"
    title: str = ""
    locations: tuple[Location, ...] = ()
    executor: ToolExecutor = "backend"


# -- tool run, execution side ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(EventBase):
    kind: Literal["tool_started"] = "tool_started"
    call_id: str
    sandbox: Sandbox | None = None
    """For tools that run commands: what confines them (None for every other tool)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput(EventBase):
    kind: Literal["tool_output"] = "tool_output"
    call_id: str
    content: tuple[ToolContent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished(EventBase):
    kind: Literal["tool_finished"] = "tool_finished"
    call_id: str
    status: ToolStatus
    content: tuple[ToolContent, ...] = ()
    raw_output_json: str | None = None
    error: ToolError | None = None


# -- permission -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequested(EventBase):
    kind: Literal["permission_requested"] = "permission_requested"
    call_id: str
    tool_name: str
    options: tuple[PermissionOption, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionResolved(EventBase):
    kind: Literal["permission_resolved"] = "permission_resolved"
    call_id: str
    tool_name: str
    outcome: PermissionOutcome
    option_id: str | None = None
    approval_key: str | None = None
    """What an "always" outcome covers (`run_command:git status`); None in logs written
    before keys existed, where the tool name is the key."""


# -- question -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAsked(EventBase):
    """A question put to the person (the model's `ask_user` call, or an agent a bridge
    drives). `schema_json` is the requested form's JSON schema as canonical JSON (form
    mode): a flat object of primitive properties; `url` the page to open (url mode);
    `call_id` the tool call the question belongs to (None: the session's own)."""

    kind: Literal["question_asked"] = "question_asked"
    question_id: str
    message: str
    mode: QuestionMode = "form"
    schema_json: str | None = None
    url: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAnswered(EventBase):
    """The person's answer to `question_id`; `content_json` is the submitted form as
    canonical JSON (accept only; None otherwise or when nothing was submitted)."""

    kind: Literal["question_answered"] = "question_answered"
    question_id: str
    action: QuestionAction
    content_json: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionCompleted(EventBase):
    """The out-of-band interaction of url question `question_id` is over: the agent waits
    on the page no more (ACP `elicitation/complete`). Only for a url question the person
    accepted; for `ask_user` it follows the accept, before the call's result."""

    kind: Literal["question_completed"] = "question_completed"
    question_id: str
    call_id: str | None = None


# -- input ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage(EventBase):
    kind: Literal["user_message"] = "user_message"
    message_id: str
    content: tuple[ContentPart, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerApplied(EventBase):
    kind: Literal["steer_applied"] = "steer_applied"
    message_id: str
    content: tuple[ContentPart, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowUpApplied(EventBase):
    kind: Literal["follow_up_applied"] = "follow_up_applied"
    message_id: str
    content: tuple[ContentPart, ...]


# -- state and plan -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanUpdated(EventBase):
    kind: Literal["plan_updated"] = "plan_updated"
    entries: tuple[PlanEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSnapshot(EventBase):
    kind: Literal["state_snapshot"] = "state_snapshot"
    state_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StateDelta(EventBase):
    """A JSON Patch (RFC 6902) against the current shared state, as canonical JSON."""

    kind: Literal["state_delta"] = "state_delta"
    patch_json: str


# -- session --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeChanged(EventBase):
    kind: Literal["mode_changed"] = "mode_changed"
    mode_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChanged(EventBase):
    kind: Literal["config_changed"] = "config_changed"
    option_id: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandsUpdated(EventBase):
    kind: Literal["commands_updated"] = "commands_updated"
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo(EventBase):
    kind: Literal["session_info"] = "session_info"
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated(EventBase):
    """Context use after a model response: `used` tokens out of `size` (when known), and
    how many of the prompt's tokens the provider's prompt cache served or stored."""

    kind: Literal["usage_updated"] = "usage_updated"
    used: int
    size: int | None = None
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


# -- control --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HookAction(EventBase):
    """A hook or a model-quality mechanism changed what the turn does.

    `hook` names who decided (a user hook's name, or `dedup`, `breaker`, `soft_timeout`,
    `recovery`, `cache_drift`, ...), `action` what (`veto`, `rewrite_arguments`, `retry`, `dedup`,
    `recover_tool_call`, ...), `detail` why, in words. `call_id` names the tool call it
    concerns. A non-empty `message` is shown to the model, as a user message, from the next
    step on (a retry's instruction, the request for a final answer).
    """

    kind: Literal["hook_action"] = "hook_action"
    hook: str
    action: str
    detail: str = ""
    call_id: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted(EventBase):
    kind: Literal["budget_exhausted"] = "budget_exhausted"
    budget: str
    limit: int
    used: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftTimeout(EventBase):
    kind: Literal["soft_timeout"] = "soft_timeout"
    elapsed_ms: int
    limit_ms: int


CompactionTrigger = Literal["pressure", "overflow", "micro", "manual"]
"""What made the runtime compact: the estimate near the window, a provider's context
overflow error, the periodic micro fold, or the user's `/compact`."""

CompactionDropReason = Literal["cancelled", "declined", "failed"]
"""Why a started compaction was not applied: the turn was cancelled while the summary was
being written, the summary would not have been smaller than what it replaces, or the log
could not take the compaction."""

CompactionScope = Literal["history", "tool_results"]
"""`history`: every message through `through_seq` becomes `summary`. `tool_results`: only
tool results through `through_seq` are folded to a one-line stub; the rest stays."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStarted(EventBase):
    """A summarize pass began asking the model for a summary (`compaction_id` names it).

    It is followed by the summary as it streams (`compaction_summary_delta`, possibly none)
    and then by exactly one of `compaction` (applied, same `compaction_id`) or
    `compaction_dropped` (not applied; the history is unchanged). Neither it nor its deltas
    change the model's history: only the `compaction` does.
    """

    kind: Literal["compaction_started"] = "compaction_started"
    compaction_id: str
    trigger: CompactionTrigger = "manual"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSummaryDelta(EventBase):
    """A piece of the summary the model is writing for `compaction_id`, as it streams. The
    pieces join to the `compaction`'s `summary` unless that is the digest (`fallback`) or
    was clipped; the `compaction` event is what the history uses, never the pieces."""

    kind: Literal["compaction_summary_delta"] = "compaction_summary_delta"
    compaction_id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionDropped(EventBase):
    """The compaction `compaction_id` started but was not applied (`reason`; `detail` says
    it in words, e.g. the reply to a declined `/compact`). The history is as before it."""

    kind: Literal["compaction_dropped"] = "compaction_dropped"
    compaction_id: str
    reason: CompactionDropReason
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction(EventBase):
    """The model's view of the log through `through_seq` is rewritten (see `scope`).

    Events after `through_seq` (the turns kept verbatim) stay as they are. `pre_tokens` and
    `post_tokens` are the runtime's estimates of the next request before and after the
    rewrite; `fallback` is true when the summary is the deterministic digest because the
    model's summary call failed; `notice` (when set) is shown to the model after the summary
    and to the user, e.g. when the compaction breaker opened; `turns` counts the user turns
    folded into the summary (0 for a fold of tool results, or a cut inside one turn).
    `compaction_id` is the id of its `compaction_started` when the summary streamed (empty
    for a fold of tool results and in logs written before summaries streamed).
    `headline` is the line a user is shown for it.
    """

    kind: Literal["compaction"] = "compaction"
    summary: str
    through_seq: int
    trigger: CompactionTrigger = "manual"
    scope: CompactionScope = "history"
    pre_tokens: int = 0
    post_tokens: int = 0
    fallback: bool = False
    notice: str = ""
    turns: int = 0
    compaction_id: str = ""

    @property
    def headline(self) -> str:
        """What happened, for the user: e.g. `Compacted 3 turns: 6,120 → 1,450 tokens.`"""
        tokens = f"{self.pre_tokens:,} → {self.post_tokens:,} tokens"
        if self.scope == "tool_results":
            text = f"Folded old tool results: {tokens}."
        else:
            plural = "s" if self.turns != 1 else ""
            what = f"{self.turns} turn{plural}" if self.turns else "the conversation so far"
            reason = {
                "pressure": "The context window was nearly full: compacted",
                "overflow": "The model's context window overflowed: compacted",
            }.get(self.trigger, "Compacted")
            text = f"{reason} {what}: {tokens}."
            if self.fallback:
                text += " The summary is a digest of those turns (the model could not write one)."
        return f"{text}\n\n{self.notice}" if self.notice else text


# -- notice ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice(EventBase):
    """Something the user must know that is not a reply: an MCP server that failed to start,
    a sandbox fallback, automatic compaction paused by its breaker, a guessed context window.

    `title` is a non-empty line that stands alone, `description` the detail or what to do
    (None: none). Notices are live information (ACP `notice`): they are logged, so traces and
    the timeline show them, but a replay (`session/load`) never resends them as history, and
    the model never sees them.
    """

    kind: Literal["notice"] = "notice"
    severity: NoticeSeverity
    title: str
    description: str | None = None


LoopEvent = (
    RunStarted
    | RunFinished
    | RunFailed
    | StepStarted
    | StepFinished
    | ModelRequestEvent
    | ModelResponseEvent
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | ToolStarted
    | ToolOutput
    | ToolFinished
    | PermissionRequested
    | PermissionResolved
    | QuestionAsked
    | QuestionAnswered
    | QuestionCompleted
    | UserMessage
    | SteerApplied
    | FollowUpApplied
    | PlanUpdated
    | StateSnapshot
    | StateDelta
    | ModeChanged
    | ConfigChanged
    | CommandsUpdated
    | SessionInfo
    | UsageUpdated
    | HookAction
    | BudgetExhausted
    | SoftTimeout
    | CompactionStarted
    | CompactionSummaryDelta
    | Compaction
    | CompactionDropped
    | Notice
)
"""One discriminated union on `kind`."""

EVENT_TYPES: tuple[type[EventBase], ...] = LoopEvent.__args__
"""Every variant, in taxonomy order."""

KINDS: tuple[str, ...] = tuple(str(t.__dataclass_fields__["kind"].default) for t in EVENT_TYPES)
"""Every kind name, in taxonomy order."""
