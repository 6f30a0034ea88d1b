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
   a call must be answered by the client (`interrupted`). It ends with exactly one
   `run_finished` or `run_failed`, after closing whatever was open: text, reasoning, tool
   calls (a synthetic `cancelled` result for each call that never finished) and the step.

How a batch of tool calls is decided and run lives in `tool_batch.py` (which asks the
turn's gate, `gate.py`, about each call); hooks in `hooks.py`; the data a turn
takes and returns in `turn.py`. The loop does no I/O of its own: events go to the session
log and to the caller's `sink`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.compaction import StepAccess
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.gate import TurnGate
from steerable_bridge.runtime.hooks import (
    HookContext,
    HookRunner,
    Narrate,
    StepRejected,
    StepReport,
)
from steerable_bridge.runtime.model import (
    CONTEXT_OVERFLOW,
    FinishReason,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    context_window,
)
from steerable_bridge.runtime.projection import project_history
from steerable_bridge.runtime.pseudo_calls import PseudoCallFilter, text_call_prefix
from steerable_bridge.runtime.quality import WATCHED, TurnGuard
from steerable_bridge.runtime.tool_batch import ToolBatch
from steerable_bridge.runtime.tools import parse_arguments
from steerable_bridge.runtime.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import (
    ContentPart,
    Location,
    TextPart,
    ToolCall,
    ToolKind,
    Usage,
)

__all__ = ["run_turn"]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=ev.EventBase)

_STRUCTURAL: frozenset[type[ev.EventBase]] = frozenset(
    {
        ev.RunStarted, ev.RunFinished, ev.RunFailed, ev.StepFinished, ev.ToolCallEnd,
        ev.ToolStarted, ev.ToolFinished, ev.PermissionRequested, ev.PermissionResolved,
        ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied, ev.ModelRequestEvent,
    }
)  # fmt: skip
"""Kinds committed to the store at once; streaming deltas are batched."""

_SLICE_S = 0.001
"""Longest stretch a turn streams buffered chunks without letting the event loop run others:
a model that answered faster than it is read leaves a burst that would otherwise hold a
busy server's loop for every chunk of it, while new requests wait to be accepted."""

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
    await t.emit(ev.RunStarted, model=ctx.model, trace_id=ctx.trace_id)
    try:
        await t.settle_open_calls()
        if t.batch.stopped:
            return await t.finish("rejected")
        if turn.state_json is not None:
            await t.emit(ev.StateSnapshot, state_json=turn.state_json)
        if turn.content:
            await t.emit(
                ev.UserMessage,
                message_id=turn.message_id or t.new_id("user"),
                content=turn.content,
            )
            if ctx.facts.title is None:
                await t.emit(ev.SessionInfo, title=_title(turn.content))
        if turn.compact and ctx.compactor is not None:
            if not turn.content and not ctx.facts.open_calls:
                await t.compact_now()
                return await t.finish("end_turn")
            ctx.compactor.request()
        step = 0
        while True:
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            for content, message_id in ctx.steering.take():
                message_id = message_id or t.new_id("steer")
                await t.emit(ev.SteerApplied, message_id=message_id, content=content)
            stop = await t.guard.at_boundary(step)  # budgets; soft timeout / dedup wrap-up
            if stop is not None:
                return await t.finish(stop)
            step += 1
            finish_reason, calls = await t.model_step(step)
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            if calls:
                await t.batch.run(calls)
                await t.end_step(finish_reason)
                if ctx.cancel.cancelled:
                    return await t.finish("cancelled")
                if t.batch.stopped:
                    return await t.finish("rejected")
                if t.batch.waiting:
                    return await t.finish("interrupted")
                continue
            await t.end_step(finish_reason)
            if len(ctx.steering):
                continue  # steering that arrived during the last step is applied, not dropped
            follow_ups = ctx.follow_ups.take()
            if follow_ups:
                for content, message_id in follow_ups:
                    message_id = message_id or t.new_id("user")
                    await t.emit(ev.FollowUpApplied, message_id=message_id, content=content)
                continue
            if finish_reason == "end_turn" and await t.completion_needs_another_step():
                continue
            return await t.finish(_STOP_FOR_FINISH[finish_reason])
    except StepRejected:
        return await t.finish("end_turn")
    except ProviderError as error:
        return await t.fail(error.code, error.message)
    except Exception as error:  # a bug: log it so the session stays consistent, then report
        log.exception("run %s failed with an unexpected error", t.run_id)
        return await t.fail("internal_error", f"{type(error).__name__}: {error}")


class _Turn:
    """The bookkeeping of one running turn: what is open, what is pending, the usage."""

    def __init__(self, ctx: TurnContext, turn: TurnInput) -> None:
        self.ctx = ctx
        self.turn = turn
        self.run_id = ctx.settings.new_id("run")
        self.usage = Usage()
        self.step: int | None = None
        self.open_text: str | None = None
        self.open_reasoning: str | None = None
        self.streaming_calls: dict[str, tuple[str, list[str]]] = {}
        self.step_text: list[str] = []
        self.guard = TurnGuard(
            settings=ctx.quality,
            active=ctx.quality.active_for(ctx.model),
            emit=self.emit,
            model=ctx.model,
            max_steps=ctx.settings.max_steps,
            calibration=ctx.calibration,
        )
        self.hooks = HookRunner(
            self.guard.hooks() + ctx.hooks,
            self.emit,
            self.hook_context,
            max_completion_retries=ctx.quality.completion_retries,
        )
        self.batch = ToolBatch(ctx, turn, self.run_id, self.emit, TurnGate(self.guard, self.hooks))
        self._last_commit = time.monotonic()
        self._yield_at = self._last_commit + _SLICE_S
        self._streamed = False
        self.window: int | None = None

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

    async def settle_open_calls(self) -> None:
        if self.ctx.facts.open_calls:
            self.snapshot_tools()
            await self.batch.settle()

    async def emit(self, cls: type[E], /, **fields: Any) -> E:
        event = self.ctx.log.record(cls, self.run_id, **fields)
        self.ctx.facts.observe(event)  # type: ignore[arg-type]
        if cls in WATCHED:
            self.guard.observe(event)  # type: ignore[arg-type]
        if self.ctx.sink is not None:
            await self.ctx.sink(event)  # type: ignore[arg-type]
        interval = self.ctx.settings.commit_interval_s
        if cls in _STRUCTURAL or time.monotonic() - self._last_commit >= interval:
            await self.commit()
        return event

    async def commit(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.ctx.log.commit()
        self._last_commit = time.monotonic()

    # -- the model step ---------------------------------------------------------------------

    async def model_step(self, step: int) -> tuple[FinishReason, list[ev.ToolCallEnd]]:
        """Stream one model call; returns its finish reason and the completed tool calls."""
        ctx = self.ctx
        system = self.snapshot_tools()
        request = self._request(system)
        self.window = await context_window(ctx.provider)
        compactor = ctx.compactor
        if compactor is not None:
            request = await compactor.before_request(self._step_access(system), request)
        self.step = step
        self.step_text = []
        await self.emit(ev.StepStarted, step=step)
        request = await self.hooks.pre_step(request)  # may raise StepRejected
        offered = {spec.name for spec in request.tools}
        self.batch.tools = {n: tool for n, tool in self.batch.tools.items() if n in offered}
        await self.emit(ev.ModelRequestEvent, step=step, request=request)
        assistant_id = self.new_id("msg")
        try:
            response = await self._stream(request, assistant_id)
        except ProviderError as error:
            if error.code != CONTEXT_OVERFLOW or self._streamed or compactor is None:
                raise
            if not compactor.settings.enabled:
                raise
            # One bounded compaction pass, then the step is retried once.
            recovered = await compactor.recover(self._step_access(system), request)
            if recovered is None:
                raise _still_overflowing(error, "nothing earlier could be compacted") from None
            recovered = await self.hooks.pre_step(recovered)
            await self.emit(ev.ModelRequestEvent, step=step, request=recovered)
            try:
                response = await self._stream(recovered, assistant_id)
            except ProviderError as again:
                if again.code == CONTEXT_OVERFLOW:
                    raise _still_overflowing(again, "it was compacted once") from None
                raise
        if ctx.cancel.cancelled:
            return "cancelled", []
        if response is None:
            raise ProviderError(
                "provider_protocol",
                "the model stream ended without a final response (connection cut or adapter bug)",
            )
        await self._close_stream()
        calls = [await self._end_call(call_id) for call_id in list(self.streaming_calls)]
        self.usage = self.usage + response.usage
        await self.emit(
            ev.ModelResponseEvent,
            step=step,
            finish_reason=response.finish_reason,
            usage=response.usage,
            model=response.model,
        )
        await self.emit(
            ev.UsageUpdated,
            used=response.usage.prompt_tokens + response.usage.completion_tokens,
            size=self.window,
            cache_read_tokens=response.usage.cached_tokens,
            cache_creation_tokens=response.usage.cache_creation_tokens,
        )
        drift = ctx.cache_drift.observe(response.usage)
        if drift is not None:
            await self.emit(
                ev.HookAction, hook="cache_drift", action="drift_detected", detail=drift.detail
            )
        finish: FinishReason = "tool_calls" if calls else response.finish_reason
        await self.hooks.post_step(
            StepReport(
                step=step,
                text="".join(self.step_text),
                tool_calls=tuple(
                    ToolCall(call_id=c.call_id, name=c.name, arguments_json=c.arguments_json)
                    for c in calls
                ),
                finish_reason=finish,
                usage=response.usage,
            )
        )
        return finish, calls

    def text_recovery(self, request: ModelRequest) -> PseudoCallFilter | None:
        """A filter that recovers tool calls written as text, when the quality layer runs
        and the step offers tools (see `pseudo_calls.py`)."""
        if request.tools and self.guard.active and self.ctx.quality.recover_tool_calls:
            return PseudoCallFilter(request.tools, id_prefix=text_call_prefix(request))
        return None

    async def _recovered(self, chunks: list[ModelChunk], assistant_id: str) -> None:
        for chunk in chunks:
            if isinstance(chunk, TextChunk):
                await self._text(chunk.delta)
            elif isinstance(chunk, ToolCallChunk):
                await self._tool_chunk(chunk, assistant_id)

    async def completion_needs_another_step(self) -> bool:
        """Ask the `before_completion` hooks about this step's answer; True to go on."""
        decision = await self.hooks.before_completion("".join(self.step_text))
        if isinstance(decision, Narrate):
            self.guard.wrapping_up = True
        return decision is not None

    def _request(self, system: str) -> ModelRequest:
        """This step's request, projected from the log as it is now."""
        return ModelRequest(
            model=self.ctx.model,
            system=system,
            messages=project_history(self.ctx.log.view()),
            tools=tuple(tool.spec() for tool in self.batch.tools.values()),
        )

    def _step_access(self, system: str) -> StepAccess:
        ctx = self.ctx

        async def emit(**fields: Any) -> None:
            await self.emit(ev.Compaction, **fields)

        return StepAccess(
            events=ctx.log.view,
            rebuild=lambda: self._request(system),
            emit=emit,
            provider=ctx.provider,
            window=self.window,
            cancel=ctx.cancel,
        )

    async def compact_now(self) -> bool:
        """A turn that only compacts (manual `/compact` between turns): True if it did."""
        compactor = self.ctx.compactor
        if compactor is None:
            return False
        compactor.request()
        before = compactor.compactions
        system = self.snapshot_tools()
        self.window = await context_window(self.ctx.provider)
        await compactor.before_request(self._step_access(system), self._request(system))
        return compactor.compactions > before

    async def _stream(self, request: ModelRequest, assistant_id: str) -> ModelResponse | None:
        """Send `request` and log what streams back; the final response, or None."""
        ctx = self.ctx
        response: ModelResponse | None = None
        self._streamed = False
        recovery = self.text_recovery(request)  # None unless calls written as text count
        plain = recovery.plain if recovery is not None else None
        with ctx.cancel.scope():
            try:
                with anyio.fail_after(ctx.settings.model_timeout_s):
                    async for item in ctx.provider.stream(request):
                        if response is not None:
                            raise ProviderError(
                                "provider_protocol",
                                "the model provider sent data after its final response;"
                                " this is a bug in the provider adapter",
                            )
                        self._streamed = True
                        if time.monotonic() >= self._yield_at:  # a burst of buffered chunks
                            await anyio.lowlevel.checkpoint()  # lets other requests in
                            self._yield_at = time.monotonic() + _SLICE_S
                        if isinstance(item, TextChunk):
                            if plain is None or plain(item.delta):
                                await self._text(item.delta)  # the common case, kept cheap
                            elif recovery is not None:
                                await self._recovered(recovery.feed(item.delta), assistant_id)
                        elif isinstance(item, ReasoningChunk):
                            await self._reasoning(item)
                        elif isinstance(item, ToolCallChunk):
                            if recovery is not None:  # held text goes before a real call
                                await self._recovered(recovery.finish(), assistant_id)
                            await self._tool_chunk(item, assistant_id)
                        elif isinstance(item, ModelResponse):
                            response = item
                        else:
                            raise ProviderError(
                                "provider_protocol",
                                f"the model provider sent an unknown item {type(item).__name__}",
                            )
            except TimeoutError:
                raise ProviderError(
                    "model_timeout",
                    f"the model did not finish within {ctx.settings.model_timeout_s:g}s;"
                    " check the model server or raise the timeout",
                    retryable=True,
                ) from None
        if recovery is not None and response is not None and not ctx.cancel.cancelled:
            await self._recovered(recovery.finish(), assistant_id)
        return response

    async def _text(self, delta: str) -> None:
        if self.open_reasoning is not None:
            await self._end_reasoning()
        if self.open_text is None:
            self.open_text = self.new_id("msg")
            await self.emit(ev.TextStart, message_id=self.open_text)
        self.step_text.append(delta)
        await self.emit(ev.TextDelta, message_id=self.open_text, delta=delta)

    async def _reasoning(self, chunk: ReasoningChunk) -> None:
        if self.open_text is not None:
            await self._end_text()
        if chunk.redacted_data is not None:
            await self._end_reasoning()  # a redacted block is a block of its own
        if self.open_reasoning is None:
            self.open_reasoning = self.new_id("think")
            await self.emit(ev.ReasoningStart, message_id=self.open_reasoning)
        sealed = chunk.signature is not None or chunk.redacted_data is not None
        if chunk.delta or not sealed:
            await self.emit(ev.ReasoningDelta, message_id=self.open_reasoning, delta=chunk.delta)
        if sealed:  # the provider sealed the block: it ends here, with its seal logged
            await self._end_reasoning(chunk.signature, chunk.redacted_data)

    async def _tool_chunk(self, chunk: ToolCallChunk, assistant_id: str) -> None:
        if chunk.call_id not in self.streaming_calls:
            parent = self.open_text or assistant_id
            await self._close_stream()
            if chunk.recovered_from is not None:
                await self.emit(
                    ev.HookAction,
                    hook="recovery",
                    action="recover_tool_call",
                    detail=chunk.recovered_from,
                    call_id=chunk.call_id,
                )
            name = chunk.name or ""
            self.streaming_calls[chunk.call_id] = (name, [])
            await self.emit(
                ev.ToolCallStart, call_id=chunk.call_id, name=name, parent_message_id=parent
            )
        if chunk.arguments_delta:
            self.streaming_calls[chunk.call_id][1].append(chunk.arguments_delta)
            await self.emit(ev.ToolCallDelta, call_id=chunk.call_id, delta=chunk.arguments_delta)

    async def _end_text(self) -> None:
        if self.open_text is not None:
            message_id, self.open_text = self.open_text, None
            await self.emit(ev.TextEnd, message_id=message_id)

    async def _end_reasoning(
        self, signature: str | None = None, redacted_data: str | None = None
    ) -> None:
        if self.open_reasoning is not None:
            message_id, self.open_reasoning = self.open_reasoning, None
            await self.emit(
                ev.ReasoningEnd,
                message_id=message_id,
                signature=signature,
                redacted_data=redacted_data,
            )

    async def _close_stream(self) -> None:
        await self._end_reasoning()
        await self._end_text()

    async def _end_call(self, call_id: str) -> ev.ToolCallEnd:
        name, parts = self.streaming_calls.pop(call_id)
        arguments = "".join(parts)
        tool = self.batch.tools.get(name)
        title: str = name
        locations: tuple[Location, ...] = ()
        kind: ToolKind = "other"
        if tool is not None:
            kind = tool.kind
            args = parse_arguments(arguments)
            if args is not None:
                title, locations = tool.describe(args)
        return await self.emit(
            ev.ToolCallEnd,
            call_id=call_id,
            name=name,
            arguments_json=arguments,
            tool_kind=kind,
            title=title,
            locations=locations,
            executor=tool.executor if tool is not None else "backend",
        )

    async def end_step(self, finish_reason: FinishReason) -> None:
        if self.step is not None:
            step, self.step = self.step, None
            await self.emit(
                ev.StepFinished, step=step, finish_reason=finish_reason, usage=self.usage
            )

    # -- ending -------------------------------------------------------------------------------

    async def _close_open(self, finish_reason: FinishReason) -> None:
        """Close whatever is open so the log never holds a dangling start or call."""
        await self._close_stream()
        for call_id in list(self.streaming_calls):
            await self._end_call(call_id)
        waiting = self.batch.waiting
        for call_id in list(self.ctx.facts.open_calls):
            if call_id not in waiting:
                await self.batch.cancel(call_id)
        await self.end_step(finish_reason)

    async def finish(self, stop_reason: StopReason) -> RunOutcome:
        interrupted = stop_reason == "interrupted"
        with anyio.CancelScope(shield=True):
            await self._close_open("cancelled" if stop_reason == "cancelled" else "end_turn")
            await self.emit(
                ev.RunFinished,
                stop_reason=stop_reason,
                usage=self.usage,
                pending_tool_call_ids=tuple(self.batch.pending) if interrupted else (),
                interrupts=tuple(self.batch.interrupts) if interrupted else (),
            )
        return RunOutcome(run_id=self.run_id, stop_reason=stop_reason, usage=self.usage)

    async def fail(self, code: str, message: str) -> RunOutcome:
        with anyio.CancelScope(shield=True):
            self.batch.pending.clear()
            self.batch.deferred.clear()
            await self._close_open("error")
            await self.emit(ev.RunFailed, code=code, message=message)
        return RunOutcome(
            run_id=self.run_id,
            stop_reason=None,
            usage=self.usage,
            error_code=code,
            error_message=message,
        )


def _still_overflowing(error: ProviderError, why: str) -> ProviderError:
    return ProviderError(
        "context_overflow_after_compaction",
        f"the request still does not fit the model's context window ({why}): {error.message}"
        " — start a new session, choose a model with a larger window, or ask for smaller"
        " pieces of work (shorter files, fewer tool results)",
    )


def _title(content: tuple[ContentPart, ...]) -> str:
    text = " ".join(p.text for p in content if isinstance(p, TextPart)).strip()
    text = " ".join(text.split())
    if not text:
        return "New session"
    return text if len(text) <= 60 else text[:57] + "..."
