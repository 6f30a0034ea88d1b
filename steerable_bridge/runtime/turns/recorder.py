"""How one running turn records its events: the turn's bookkeeping and its `emit`.

`TurnRecorder` holds what a turn carries from step to step (its run id, the usage summed so
far, the step in progress, the turn's guard, hooks and tool batch) and `emit`, the one path
every LoopEvent of the turn takes: into the session log, the session facts, the guard (for
the kinds it watches, `quality.py`), the caller's `sink` (a transport's renderer), then a
commit to the store at once for structural kinds and at most every `commit_interval_s` for
streaming deltas. When the store refuses a commit (`storage_full`, say) the error is raised
once, so the loop ends the turn with its code; the rest of the turn is recorded and sent but
not committed (it stays pending in the log for the next commit). A commit that had to
repair an unencodable event (`log.py`) raises `UnencodableEvent`, so the turn ends with
`run_failed` (`internal_error`) — checked again before `run_finished`, since the flusher may
have done that commit. A turn holds one: `loop.py`'s turn (`run_turn`) gives it to its
`model_step.ModelStep`, which streams each model call through `emit`, and the bridged turns
(`transports/*/bridge`) record through one too; it does no I/O beyond the log and the sink.
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_quality.quality import WATCHED, TurnGuard
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.session_log.log import UnencodableEvent
from steerable_bridge.runtime.tool_calls.gate import TurnGate
from steerable_bridge.runtime.tool_calls.tool_batch import ToolBatch
from steerable_bridge.runtime.turns.hooks import HookContext, HookRunner
from steerable_bridge.runtime.turns.turn import TurnContext, TurnInput
from steerable_bridge.runtime.values import Usage

__all__ = ["TurnRecorder"]

E = TypeVar("E", bound=ev.EventBase)

_STRUCTURAL: frozenset[type[ev.EventBase]] = frozenset(
    {
        ev.RunStarted, ev.RunFinished, ev.RunFailed, ev.StepFinished, ev.ToolCallEnd,
        ev.ToolStarted, ev.ToolFinished, ev.PermissionRequested, ev.PermissionResolved,
        ev.QuestionAsked, ev.QuestionAnswered, ev.QuestionCompleted,
        ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied, ev.ModelRequestEvent,
    }
)  # fmt: skip
"""Kinds committed to the store at once; streaming deltas are batched."""

_FINAL: frozenset[type[ev.EventBase]] = frozenset({ev.RunFinished, ev.RunFailed})


class TurnRecorder:
    """The bookkeeping of one running turn: its ids, the usage, the step, how events go out."""

    def __init__(self, ctx: TurnContext, turn: TurnInput) -> None:
        self.ctx = ctx
        self.turn = turn
        self.run_id = ctx.settings.new_id("run")
        self.usage = Usage()
        self.step: int | None = None
        self.guard = TurnGuard(
            settings=ctx.quality,
            active=ctx.quality.active_for(ctx.model),
            emit=self.emit,
            model=ctx.model,
            max_steps=ctx.settings.max_steps,
            calibration=ctx.calibration,
            estimator=ctx.estimator,
        )
        self.hooks = HookRunner(
            self.guard.hooks() + ctx.hooks,
            self.emit,
            self.hook_context,
            max_completion_retries=ctx.quality.completion_retries,
        )
        self.batch = ToolBatch(ctx, turn, self.run_id, self.emit, TurnGate(self.guard, self.hooks))
        self._last_commit = time.monotonic()
        self.store_failure: StoreError | None = None
        """The store refused the turn's events (disk full, say): the turn is ending, its
        events stay in the log (pending) and reach the sink, and no commit is tried again."""
        self.ended = False
        """`run_finished` or `run_failed` was recorded: the turn has its one final event."""
        ctx.log.take_repairs()  # repairs of events before this turn were logged; not its own

    def new_id(self, prefix: str) -> str:
        return self.ctx.settings.new_id(prefix)

    def hook_context(self) -> HookContext:
        ctx = self.ctx
        return HookContext(
            session_id=ctx.log.session_id,
            run_id=self.run_id,
            step=self.step or 0,
            model=ctx.model,
            cwd=ctx.cwd,
        )

    def snapshot_tools(self) -> str:
        """Take this step's tools (registered now, plus the client's); returns the prompt.
        While the turn wraps up (soft timeout, repeated calls) no tools are offered."""
        ctx = self.ctx
        system, registered = ctx.snapshot() if ctx.snapshot else (ctx.system, ctx.tools)
        tools = () if self.guard.wrapping_up else registered + self.turn.client_tools
        self.batch.tools = {tool.name: tool for tool in tools}
        return system

    async def emit(self, cls: type[E], /, **fields: Any) -> E:
        if cls is ev.RunFinished:  # a run that logged an unencodable event must not end well
            await self.commit()
        event = self.ctx.log.record(cls, self.run_id, **fields)
        if cls in _FINAL:
            self.ended = True
        self.ctx.facts.observe(event)  # type: ignore[arg-type]
        if cls in WATCHED:
            self.guard.observe(event)  # type: ignore[arg-type]
        if self.ctx.sink is not None:
            await self.ctx.sink(event)  # type: ignore[arg-type]
        interval = self.ctx.settings.commit_interval_s
        if cls in _STRUCTURAL or time.monotonic() - self._last_commit >= interval:
            await self.commit(report=cls is not ev.RunFailed)
        return event

    async def commit(self, *, report: bool = True) -> None:
        """Write what the log holds. The first store failure is raised (the loop ends the turn
        with its code) and later commits of the turn are skipped; `UnencodableEvent` is raised
        (the turn fails with `internal_error`) when the log had to repair an event of this
        turn (`log.py`), unless `report` is off."""
        if self.store_failure is not None:
            return
        log = self.ctx.log
        with anyio.CancelScope(shield=True):
            try:
                await log.commit()
            except StoreError as failure:
                self.store_failure = failure
                raise
        self._last_commit = time.monotonic()
        if log.repairs and report:
            raise UnencodableEvent(log.take_repairs())
