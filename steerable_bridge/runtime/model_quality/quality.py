"""The model-quality guards of one turn: budgets, soft timeout, duplicate calls, error breaker.

Weak, local and cheap models fail in a few recurring ways; each guard here turns one of them
into a bounded, logged outcome instead of a runaway turn:

- **budgets** (steps, tool calls, tokens per turn): exhausting one ends the turn with
  `budget_exhausted` (stop reason `max_steps` for steps and tool calls, `max_tokens` for
  tokens); calls past the tool-call budget get a synthetic result, never a dangling call.
- **soft timeout**: at a step boundary after `soft_timeout_s`, `soft_timeout` is logged and
  the turn wraps up: the next step offers no tools and the model is asked for its answer.
  A model call that missed its deadline (`model_timeout`) wraps the turn up the same way,
  once, while the soft timeout is on and the turn is not wrapping up already
  (`wrap_up_after_timeout`); otherwise the turn fails with that code.
- **dedup**: a call identical (name and canonical arguments) to one that already completed
  in this turn is not run again; the model gets the earlier result with a note
  (`hook_action` `dedup`). A call that changes things (not read-only) makes the turn
  forget the results before it, since they may be stale. After `dedup_limit` dedups the
  turn wraps up.
- **error breaker**: after `error_breaker` consecutive failed calls, the rest of the batch
  is skipped with synthetic failed results (`breaker_skipped`) and the model is told why.

`TurnGuard` sees every event the turn logs (`observe`), answers calls it will not let run
(`before_tool`), and decides at each step boundary (`at_boundary`). Token counting also
feeds the process's `TokenCalibration`. `QualitySettings` (`quality_settings.py`, re-exported
here) says which guards run; they are on for `openai:` routes by default (`mode="auto"`).
Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.model_context.tokens import RequestEstimator, TokenCalibration
from steerable_bridge.runtime.model_quality.quality_settings import QualityMode, QualitySettings
from steerable_bridge.runtime.ports.tools import READ_ONLY_KINDS, ToolResult, parse_arguments
from steerable_bridge.runtime.turns.hooks import Hook, HookContext, Narrate
from steerable_bridge.runtime.values import TextPart, ToolContent, ToolError

__all__ = ["WATCHED", "QualityMode", "QualitySettings", "TurnGuard", "call_key"]

E = TypeVar("E", bound=ev.EventBase)

WRAP_UP_MESSAGE = (
    "{why} Tools are closed for the rest of this turn. Answer the user now with what you"
    " have: what you did, what you found, and what is still open."
)

_NOT_TOOL_ERRORS = frozenset(
    {
        "permission_denied",
        "permission_timeout",
        "cancelled",
        "breaker_skipped",
        "budget_exhausted",
        "vetoed",
    }
)
"""Failures that say nothing about whether the model calls tools well."""


class Emit(Protocol):
    async def __call__(self, cls: type[E], /, **fields: Any) -> E: ...


def call_key(name: str, arguments_json: str) -> tuple[str, str] | None:
    """(name, canonical arguments) of a call, or None when its arguments are not an object."""
    args = parse_arguments(arguments_json)
    if args is None:
        return None
    return name, json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


WATCHED: frozenset[type[ev.EventBase]] = frozenset(
    {ev.ToolCallEnd, ev.ToolFinished, ev.ModelRequestEvent, ev.ModelResponseEvent}
)
"""The kinds `TurnGuard.observe` reads; the loop skips the call for every other kind."""


@dataclass(slots=True)
class _Call:
    name: str
    kind: str
    key: tuple[str, str] | None


@dataclass(slots=True)
class TurnGuard:
    """The guards' state for one turn; see the module docstring."""

    settings: QualitySettings
    active: bool
    emit: Emit
    model: str
    max_steps: int
    calibration: TokenCalibration | None = None
    estimator: RequestEstimator = field(default_factory=RequestEstimator)
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    wrapping_up: bool = False
    tool_calls_used: int = 0
    tokens_used: int = 0
    dedups: int = 0
    consecutive_errors: int = 0
    _calls: dict[str, _Call] = field(default_factory=dict)
    _results: dict[tuple[str, str], tuple[str, tuple[ToolContent, ...]]] = field(
        default_factory=dict
    )
    _synthetic: set[str] = field(default_factory=set)
    _estimate: int = 0
    _tool_budget_hit: bool = False
    _breaker_tripped: bool = False
    _steered_out: bool = False
    _timed_out: bool = False
    _called_while_closed: bool = False

    def __post_init__(self) -> None:
        self.started = self.clock()

    def hooks(self) -> tuple[Hook, ...]:
        """The guards' own hooks (run before the user's): narrate an empty final answer."""
        if self.active and self.settings.narrate_empty:
            return (Hook(name="empty_answer", before_completion=self._empty_answer),)
        return ()

    def _empty_answer(self, draft: str, ctx: HookContext) -> Narrate | None:
        if draft.strip() or not self._calls:
            return None
        return Narrate("the model used tools and then ended without an answer")

    # -- watching the log ------------------------------------------------------------------

    def observe(self, event: ev.LoopEvent) -> None:
        """Fold one logged event into the counters; only kinds in `WATCHED` matter."""
        if isinstance(event, ev.ToolCallEnd):
            self._calls[event.call_id] = _Call(
                event.name, event.tool_kind, call_key(event.name, event.arguments_json)
            )
            if self.wrapping_up:
                self._called_while_closed = True
        elif isinstance(event, ev.ToolFinished):
            self._finished(event)
        elif isinstance(event, ev.ModelRequestEvent):
            if self.calibration is not None or self.settings.max_turn_tokens:
                self._estimate = self.estimator.estimate(event.request)
        elif isinstance(event, ev.ModelResponseEvent):
            self._count_tokens(event)

    def _finished(self, event: ev.ToolFinished) -> None:
        call = self._calls.get(event.call_id)
        if event.call_id in self._synthetic or call is None:
            return
        if event.status == "completed":
            self.consecutive_errors = 0
            if call.kind not in READ_ONLY_KINDS:
                self._results.clear()  # it may have changed what earlier calls saw
            if call.key is not None:
                self._results[call.key] = (event.call_id, event.content)
        elif event.status == "failed":
            code = event.error.code if event.error is not None else ""
            if code not in _NOT_TOOL_ERRORS:
                self.consecutive_errors += 1

    def _count_tokens(self, event: ev.ModelResponseEvent) -> None:
        usage = event.usage
        estimate, self._estimate = self._estimate, 0
        if usage.prompt_tokens > 0:
            if self.calibration is not None:
                self.calibration.observe(self.model, estimate, usage.prompt_tokens)
            self.tokens_used += usage.prompt_tokens + usage.completion_tokens
        else:
            calibrated = (
                self.calibration.calibrated(self.model, estimate) if self.calibration else estimate
            )
            self.tokens_used += calibrated + usage.completion_tokens

    # -- before a call runs ------------------------------------------------------------------

    async def before_tool(self, call: ev.ToolCallEnd) -> ToolResult | None:
        """A result for a call that must not run (logged as `hook_action`), or None."""
        if not self.active:
            return None
        limit = self.settings.max_tool_calls
        if limit is not None and self.tool_calls_used >= limit:
            self._tool_budget_hit = True
            return await self._answer(
                call,
                "budget",
                "skip",
                "budget_exhausted",
                f"not run: this turn already ran its {limit} tool calls",
            )
        if self._breaker_tripped:
            return await self._answer(
                call,
                "breaker",
                "skip",
                "breaker_skipped",
                f"not run: the {self.settings.error_breaker} tool calls before it failed in a"
                " row, so the rest of this batch was skipped",
            )
        if self.settings.dedup:
            key = call_key(call.name, call.arguments_json)
            earlier = self._results.get(key) if key is not None else None
            if earlier is not None:
                self.dedups += 1
                earlier_id, content = earlier
                note = (
                    f"This call is identical to {earlier_id}, which already ran in this turn,"
                    " so it was not run again. Its result is repeated below; use it instead"
                    " of calling again."
                )
                self._synthetic.add(call.call_id)
                await self.emit(
                    ev.HookAction,
                    hook="dedup",
                    action="dedup",
                    detail=f"same call as {earlier_id}",
                    call_id=call.call_id,
                )
                return ToolResult(content=(TextPart(text=note), *content))
        self.tool_calls_used += 1
        return None

    async def _answer(
        self, call: ev.ToolCallEnd, hook: str, action: str, code: str, message: str
    ) -> ToolResult:
        self._synthetic.add(call.call_id)
        await self.emit(
            ev.HookAction, hook=hook, action=action, detail=message, call_id=call.call_id
        )
        return ToolResult(
            content=(TextPart(text=message),), error=ToolError(code=code, message=message)
        )

    def after_result(self) -> None:
        """Called after each call of a batch is logged: trips the breaker when due."""
        limit = self.settings.error_breaker
        if self.active and limit and self.consecutive_errors >= limit:
            self._breaker_tripped = True

    # -- step boundaries ---------------------------------------------------------------------

    async def at_boundary(self, steps_done: int) -> StopReason | None:
        """Before the next step: end the turn (a budget), wrap it up, or let it go on."""
        emit = self.emit
        if self._tool_budget_hit:
            await emit(
                ev.BudgetExhausted,
                budget="tool_calls",
                limit=self.settings.max_tool_calls or 0,
                used=self.tool_calls_used,
            )
            return "max_steps"
        if steps_done >= self.max_steps:
            await emit(ev.BudgetExhausted, budget="steps", limit=self.max_steps, used=steps_done)
            return "max_steps"
        token_limit = self.settings.max_turn_tokens
        if self.active and token_limit and self.tokens_used >= token_limit:
            await emit(
                ev.BudgetExhausted, budget="tokens", limit=token_limit, used=self.tokens_used
            )
            return "max_tokens"
        if not self.active or steps_done == 0:
            return None
        if self._called_while_closed:
            await emit(
                ev.HookAction,
                hook="wrap_up",
                action="end_turn",
                detail="the model called tools after tools were closed for this turn",
            )
            return "end_turn"
        if self._breaker_tripped:
            self._breaker_tripped = False
            self.consecutive_errors = 0
            limit = self.settings.error_breaker
            await emit(
                ev.HookAction,
                hook="breaker",
                action="trip",
                detail=f"{limit} tool calls failed in a row",
                message=f"Your last {limit} tool calls failed. Stop and read the errors; change"
                " your approach (other arguments, another tool) or answer without tools.",
            )
        await self._maybe_wrap_up()
        return None

    async def _maybe_wrap_up(self) -> None:
        if self.wrapping_up:
            return
        limit = self.settings.dedup_limit
        if self.settings.dedup and limit and self.dedups >= limit and not self._steered_out:
            self._steered_out = True
            await self.close_tools(
                "dedup",
                "steer_out",
                f"{self.dedups} repeated calls in this turn",
                f"You repeated tool calls {self.dedups} times in this turn.",
            )
            return
        timeout = self.settings.soft_timeout_s
        elapsed = self.clock() - self.started
        if timeout is not None and elapsed >= timeout and not self._timed_out:
            self._timed_out = True
            await self.emit(
                ev.SoftTimeout, elapsed_ms=round(elapsed * 1000), limit_ms=round(timeout * 1000)
            )
            await self.close_tools(
                "soft_timeout",
                "wrap_up",
                f"the turn ran past its soft limit of {timeout:g}s",
                "This turn has run out of time.",
            )

    def may_wrap_up_after_timeout(self) -> bool:
        """Whether a model call that missed its deadline wraps the turn up (the soft timeout
        is on and has not wrapped it up yet) rather than failing it."""
        return self.active and self.settings.soft_timeout_s is not None and not self.wrapping_up

    async def wrap_up_after_timeout(self, detail: str) -> None:
        """A model call missed its deadline: from the next step on, no tools, answer now."""
        self._timed_out = True
        await self.close_tools(
            "soft_timeout",
            "wrap_up",
            f"a model call ran out of time: {detail}",
            "The last model call ran out of time.",
        )

    async def close_tools(self, hook: str, action: str, detail: str, why: str) -> None:
        """From the next step on, offer no tools and ask the model for its final answer."""
        self.wrapping_up = True
        await self.emit(
            ev.HookAction,
            hook=hook,
            action=action,
            detail=detail,
            message=WRAP_UP_MESSAGE.format(why=why),
        )
