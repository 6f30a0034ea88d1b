"""The turn / step loop: user input in, a typed LoopEvent stream out, every event logged.

`run_turn` reads top to bottom as the turn it runs:

1. `run_started`; settle tool calls an earlier run left open (frontend tool results,
   approvals given through `resume`, anything unanswered gets a `cancelled` result);
   the client's shared state (`state_snapshot`) and the user's message (`user_message`,
   plus `session_info` with a title on the first prompt).
2. Each step: inject queued steering (`steer_applied`); at the boundary the turn's guards
   (`quality.py`) may end it on a budget (`budget_exhausted`) or wrap it up (tools closed);
   snapshot tools and prompt, pass the request through the `pre_step` hooks; log the
   full `model_request`; stream the provider, logging every chunk as text / reasoning /
   tool-call events (tool calls the model wrote as text are recovered into real ones,
   `pseudo_calls.py`); `model_response` and `usage_updated` (plus a `hook_action` when the
   prompt-cache hit rate has collapsed, `cache_drift.py`); run the tool calls in order
   (permission first when needed; parallel-safe calls concurrently, results still logged in
   call order); `step_finished`.
3. The turn ends when the model stops without tool calls, no steering or follow-up
   waits (either starts another step otherwise) and the `before_completion` hooks accept
   the answer (a retry or narration starts another step), at `max_steps`, on cancel, or when
   a call must be answered by the client (`interrupted`). A model call that missed its
   deadline fails the turn (`model_timeout`), or, under the soft timeout, wraps it up
   (one more step without tools, `quality.py`). It ends with exactly one
   `run_finished` or `run_failed`, after closing whatever was open: text, reasoning, tool
   calls (a synthetic `cancelled` result for each call that never finished) and the step.

A prompt reaches `run_turn` from a transport through `session.py` (`Session.prompt`);
one model call (request, provider stream, chunks to events) lives in `model_step.py`; how
each event is recorded (log, facts, guard, the caller's `sink`, commit cadence) in
`recorder.py`; how a batch of tool calls is run in `tool_batch.py` (which asks the turn's
gate, `gate.py`, about each call, and `decision.py` whether a call may run); hooks in
`hooks.py`; the data a turn takes and returns in `turn.py`. The loop does no I/O of its
own: events go to the session log and to the caller's `sink`, which a transport renders onto
its wire.
"""

from __future__ import annotations

import logging

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.surrogates import scrub
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.ports.model import FinishReason, ProviderError
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.turns.hooks import Narrate, StepRejected
from steerable_bridge.runtime.turns.model_step import ModelStep
from steerable_bridge.runtime.turns.recorder import TurnRecorder
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import ContentPart, TextPart

__all__ = ["run_turn"]

log = logging.getLogger(__name__)

_STOP_FOR_FINISH: dict[FinishReason, StopReason] = {
    "end_turn": "end_turn",
    "tool_calls": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "cancelled": "cancelled",
    "error": "end_turn",
}


async def run_turn(ctx: TurnContext, turn: TurnInput) -> RunOutcome:
    """Run one turn to its end; never raises for failures the log can record."""
    t = _Turn(ctx, turn)
    rec = t.rec
    try:
        stop = await t.begin(turn)  # run_started, open calls settled, the user's message
        if stop is not None:
            return await t.finish(stop)
        step = 0
        while True:
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            await t.apply_steering()
            stop = await rec.guard.at_boundary(step)  # budgets; soft timeout / dedup wrap-up
            if stop is not None:
                return await t.finish(stop)
            step += 1
            try:
                finish_reason, calls = await t.call.model_step(step)
            except ProviderError as error:
                if not await t.wrap_up_after_timeout(error):
                    raise
                continue  # one more step, without tools, for the model's answer
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            if calls:
                stop = await t.after_calls(calls, finish_reason)
            else:
                stop = await t.after_answer(finish_reason)
            if stop is not None:
                return await t.finish(stop)
    except StepRejected:
        return await t.finish("end_turn")
    except ProviderError as error:
        return await t.fail(error.code, error.message)
    except StoreError as error:  # the log cannot be written (disk full): end with its code
        log.warning("run %s: the session store failed: %s", rec.run_id, error.message)
        return await t.fail(error.code, error.message)
    except Exception as error:  # a bug: log it so the session stays consistent, then report
        log.exception("run %s failed with an unexpected error", rec.run_id)
        return await t.fail("internal_error", f"{type(error).__name__}: {error}")


class _Turn:
    """One running turn: its recorder (`rec`), its model calls (`call`), what `run_turn` asks
    of it besides a model step, and how it ends."""

    def __init__(self, ctx: TurnContext, turn: TurnInput) -> None:
        self.ctx = ctx
        self.rec = TurnRecorder(ctx, turn)
        self.call = ModelStep(self.rec)

    async def begin(self, turn: TurnInput) -> StopReason | None:
        """Open the turn: `run_started` and the advisories, the calls an earlier run left
        open settled, the client's state and the user's message (with a title on the first
        prompt). A stop reason when the turn ends there (a rejected call, a compaction
        alone), else None: the steps follow."""
        ctx = self.ctx
        await self.rec.emit(
            ev.RunStarted, model=ctx.model, trace_id=ctx.trace_id, **turn.run_started_fields()
        )
        for advisory in ctx.advisories:
            await self.rec.emit(
                ev.Notice,
                severity=advisory.severity,
                title=advisory.title,
                description=advisory.description,
            )
        await self.settle_open_calls()
        if self.rec.batch.stopped:
            return "rejected"
        if turn.state_json is not None:
            await self.rec.emit(ev.StateSnapshot, state_json=turn.state_json)
        if turn.content:
            await self.rec.emit(
                ev.UserMessage,
                message_id=turn.message_id or self.rec.new_id("user"),
                content=turn.content,
            )
            if ctx.facts.title is None:
                await self.rec.emit(ev.SessionInfo, title=_title(turn.content))
        if turn.compact and ctx.compactor is not None:
            if not turn.content and not ctx.facts.open_calls:
                await self.call.compact_now()
                return "cancelled" if ctx.cancel.cancelled else "end_turn"
            ctx.compactor.request()
        return None

    async def apply_steering(self) -> None:
        """Log the steering queued since the last step (`steer_applied`): the next model
        request carries it."""
        for content, message_id in self.ctx.steering.take():
            message_id = message_id or self.rec.new_id("steer")
            await self.rec.emit(ev.SteerApplied, message_id=message_id, content=content)

    async def after_calls(
        self, calls: list[ev.ToolCallEnd], finish_reason: FinishReason
    ) -> StopReason | None:
        """Run the step's tool calls and end the step; a stop reason when the turn ends
        (cancelled, a rejected call, a call the client must answer), else None."""
        await self.rec.batch.run(calls)
        await self.end_step(finish_reason)
        if self.ctx.cancel.cancelled:
            return "cancelled"
        if self.rec.batch.stopped:
            return "rejected"
        if self.rec.batch.waiting:
            return "interrupted"
        return None

    async def after_answer(self, finish_reason: FinishReason) -> StopReason | None:
        """End a step without tool calls; None when another step follows (steering or a
        follow-up waits, or the `before_completion` hooks want one), else the stop reason."""
        ctx = self.ctx
        await self.end_step(finish_reason)
        if len(ctx.steering):
            return None  # steering that arrived during the last step is applied, not dropped
        follow_ups = ctx.follow_ups.take()
        if follow_ups:
            for content, message_id in follow_ups:
                message_id = message_id or self.rec.new_id("user")
                await self.rec.emit(ev.FollowUpApplied, message_id=message_id, content=content)
            return None
        if finish_reason == "end_turn" and await self.completion_needs_another_step():
            return None
        return _STOP_FOR_FINISH[finish_reason]

    async def settle_open_calls(self) -> None:
        if self.ctx.facts.open_calls:
            self.rec.snapshot_tools()
            await self.rec.batch.settle()

    async def completion_needs_another_step(self) -> bool:
        """Ask the `before_completion` hooks about this step's answer; True to go on."""
        decision = await self.rec.hooks.before_completion("".join(self.call.step_text))
        if isinstance(decision, Narrate):
            self.rec.guard.wrapping_up = True
        return decision is not None

    async def wrap_up_after_timeout(self, error: ProviderError) -> bool:
        """A model call that missed its deadline, under the soft timeout: close what it
        streamed (a partial tool call gets a `cancelled` result) and wrap the turn up, as the
        soft timeout does (`quality.py`). False: the turn fails with the error."""
        if error.code != "model_timeout" or self.ctx.cancel.cancelled:
            return False
        guard = self.rec.guard
        if not guard.may_wrap_up_after_timeout():
            return False
        await self._close_open("error")
        await guard.wrap_up_after_timeout(error.message)
        return True

    async def end_step(self, finish_reason: FinishReason) -> None:
        rec = self.rec
        if rec.step is not None:
            step, rec.step = rec.step, None
            await rec.emit(ev.StepFinished, step=step, finish_reason=finish_reason, usage=rec.usage)

    # -- ending -------------------------------------------------------------------------------

    async def _close_open(self, finish_reason: FinishReason) -> None:
        """Close whatever is open so the log never holds a dangling start or call."""
        await self.call.close()
        batch = self.rec.batch
        waiting = batch.waiting
        for call_id in list(self.ctx.facts.open_calls):
            if call_id not in waiting:
                await batch.cancel(call_id)
        await self.end_step(finish_reason)

    async def finish(self, stop_reason: StopReason) -> RunOutcome:
        rec, interrupted = self.rec, stop_reason == "interrupted"
        with anyio.CancelScope(shield=True):
            await self._close_open("cancelled" if stop_reason == "cancelled" else "end_turn")
            await rec.emit(
                ev.RunFinished,
                stop_reason=stop_reason,
                usage=rec.usage,
                pending_tool_call_ids=tuple(rec.batch.pending) if interrupted else (),
                interrupts=tuple(rec.batch.interrupts) if interrupted else (),
            )
        return RunOutcome(run_id=rec.run_id, stop_reason=stop_reason, usage=rec.usage)

    async def fail(self, code: str, message: str) -> RunOutcome:
        rec = self.rec
        with anyio.CancelScope(shield=True):
            rec.batch.pending.clear()
            rec.batch.deferred.clear()
            if not rec.ended:  # a store failure on the final event: that event stands
                await self._close_open("error")
                message = scrub(message)  # an error may quote text that UTF-8 cannot encode
                await rec.emit(ev.RunFailed, code=code, message=message)
        return RunOutcome(
            run_id=rec.run_id,
            stop_reason=None,
            usage=rec.usage,
            error_code=code,
            error_message=message,
        )


def _title(content: tuple[ContentPart, ...]) -> str:
    text = " ".join(p.text for p in content if isinstance(p, TextPart)).strip()
    text = " ".join(text.split())
    if not text:
        return "New session"
    return text if len(text) <= 60 else text[:57] + "..."
