"""One model call of a turn: build the request, stream the provider, log what comes back.

`ModelStep.model_step` snapshots the step's tools and prompt, lets the compactor shrink the
request when it nears the context window (`compaction.py`), runs the `pre_step` hooks, logs
the full `model_request`, then streams the provider (`model.py`'s port) under the model
timeout and the turn's cancel scope. Each chunk becomes text / reasoning / tool-call events
with explicit start, delta and end (tool calls the model wrote as text are recovered into
real ones, reasoning written as text becomes reasoning: `pseudo_calls.py`); a context
overflow gets one compaction pass and one retry. After the final response it logs
`model_response`, `usage_updated` (and a `hook_action` when the provider replaced lone
surrogates, or the prompt-cache hit rate collapsed, `cache_drift.py`), runs the `post_step`
hooks and hands the completed tool calls back to `loop.py`, which runs them
(`tool_batch.py`). A `ModelStep` is given the turn's `TurnRecorder` (`recorder.py`) and
every event goes out through its `emit`, bound once: this is the per-chunk hot path, so it
adds no layer per chunk. `close` ends what a cut stream left open; `compact_now` runs the
compactor outside a step (manual `/compact`).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.surrogates import REPAIR_ACTION, REPAIR_HOOK, repair_detail
from steerable_bridge.runtime.model_context.compaction import StepAccess
from steerable_bridge.runtime.model_quality.pseudo_calls import PseudoCallFilter, text_call_prefix
from steerable_bridge.runtime.ports.model import (
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
from steerable_bridge.runtime.ports.tools import parse_arguments
from steerable_bridge.runtime.tool_calls.exposure import SEARCH_TOOL, ToolShelf
from steerable_bridge.runtime.turns.hooks import StepReport
from steerable_bridge.runtime.turns.recorder import TurnRecorder
from steerable_bridge.runtime.values import Location, ToolCall, ToolKind

__all__ = ["ModelStep"]

_SLICE_S = 0.001
"""Longest stretch a turn streams buffered chunks without letting the event loop run others:
a model that answered faster than it is read leaves a burst that would otherwise hold a
busy server's loop for every chunk of it, while new requests wait to be accepted."""


class ModelStep:
    """A turn's model calls: what is open in the stream (text, reasoning, calls), step text.

    It records through the turn's `rec` (the step number and summed usage live there, for
    the hooks and `step_finished`); `emit` and `batch` are the recorder's own, bound once so
    a streamed chunk costs no more lookups than on the recorder itself."""

    def __init__(self, rec: TurnRecorder) -> None:
        self.rec = rec
        self.ctx = rec.ctx
        self.emit = rec.emit
        self.batch = rec.batch
        self.open_text: str | None = None
        self.open_reasoning: str | None = None
        self.streaming_calls: dict[str, tuple[str, list[str]]] = {}
        self.step_text: list[str] = []
        self._yield_at = time.monotonic() + _SLICE_S
        self._streamed = False
        self.window: int | None = None

    async def model_step(self, step: int) -> tuple[FinishReason, list[ev.ToolCallEnd]]:
        """Stream one model call; returns its finish reason and the completed tool calls."""
        ctx, rec = self.ctx, self.rec
        system = rec.snapshot_tools()
        self.window = await context_window(ctx.provider)
        if step == 1 and self.window and ctx.provider.info.window_guessed:
            await self._tell_window_guess(self.window)
        shelf = ctx.shelf
        if shelf is not None and self.batch.tools:
            tiered = shelf.offer(tuple(self.batch.tools.values()), self.window)
            self.batch.tools = {tool.name: tool for tool in tiered}
        request = self._request(system)
        compactor = ctx.compactor
        if compactor is not None:
            request = await compactor.before_request(self._step_access(system), request)
        rec.step = step
        self.step_text = []
        await self.emit(ev.StepStarted, step=step)
        if shelf is not None:
            await self._log_exposure(shelf)
        request = await rec.hooks.pre_step(request)  # may raise StepRejected
        offered = {spec.name for spec in request.tools}
        self.batch.tools = {n: tool for n, tool in self.batch.tools.items() if n in offered}
        await self.emit(ev.ModelRequestEvent, step=step, request=request)
        assistant_id = rec.new_id("msg")
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
            recovered = await rec.hooks.pre_step(recovered)
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
        rec.usage = rec.usage + response.usage
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
        if response.replaced_surrogates:
            await self.emit(
                ev.HookAction,
                hook=REPAIR_HOOK,
                action=REPAIR_ACTION,
                detail=repair_detail("the model's answer", response.replaced_surrogates),
            )
        drift = ctx.cache_drift.observe(response.usage)
        if drift is not None:
            await self.emit(
                ev.HookAction, hook="cache_drift", action="drift_detected", detail=drift.detail
            )
        finish: FinishReason = "tool_calls" if calls else response.finish_reason
        await rec.hooks.post_step(
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

    async def close(self) -> None:
        """End what the stream left open (reasoning, text, tool calls being streamed), so the
        log never holds a dangling start; a call cut off here still gets its `tool_call_end`."""
        await self._close_stream()
        for call_id in list(self.streaming_calls):
            await self._end_call(call_id)

    async def compact_now(self) -> bool:
        """Compact outside a step (manual `/compact` between turns): True if it did."""
        compactor = self.ctx.compactor
        if compactor is None:
            return False
        compactor.request()
        before = compactor.compactions
        system = self.rec.snapshot_tools()
        self.window = await context_window(self.ctx.provider)
        await compactor.before_request(self._step_access(system), self._request(system))
        return compactor.compactions > before

    async def _log_exposure(self, shelf: ToolShelf) -> None:
        """A `hook_action` when the deferred tools or those `tool_search` found changed."""
        deferred, found = len(shelf.deferred), len(shelf.found)
        logged_deferred, logged_found = shelf.logged
        shelf.logged = (deferred, found)
        if deferred != logged_deferred and deferred:
            await self.emit(
                ev.HookAction,
                hook="tool_exposure",
                action="defer",
                detail=f"{deferred} tools wait behind {SEARCH_TOOL} to keep the request small",
            )
        if found > logged_found:
            await self.emit(
                ev.HookAction,
                hook="tool_exposure",
                action="activate",
                detail="found by tool_search: " + ", ".join(shelf.found[logged_found:]),
            )

    def text_recovery(self, request: ModelRequest) -> PseudoCallFilter | None:
        """A filter that routes reasoning written as text to reasoning events and, when the
        step offers tools, recovers tool calls written as text; on when the quality layer
        runs (see `pseudo_calls.py`)."""
        if self.rec.guard.active and self.ctx.quality.recover_tool_calls:
            return PseudoCallFilter(request.tools, id_prefix=text_call_prefix(request))
        return None

    async def _recovered(self, chunks: list[ModelChunk], assistant_id: str) -> None:
        for chunk in chunks:
            if isinstance(chunk, TextChunk):
                await self._text(chunk.delta)
            elif isinstance(chunk, ReasoningChunk):
                await self._reasoning(chunk)
            elif isinstance(chunk, ToolCallChunk):
                await self._tool_chunk(chunk, assistant_id)

    def _request(self, system: str) -> ModelRequest:
        """This step's request, with the history the log keeps up to date as it is now."""
        return ModelRequest(
            model=self.ctx.model,
            system=system,
            messages=self.ctx.log.history.messages(),
            tools=tuple(tool.spec() for tool in self.batch.tools.values()),
        )

    async def _tell_window_guess(self, window: int) -> None:
        """Tell the user, once per session, that compaction works from a guessed window."""
        title = f"Context window guessed: {window:,} tokens"
        if any(isinstance(e, ev.Notice) and e.title == title for e in self.ctx.log.view().folded()):
            return
        await self.emit(
            ev.Notice,
            severity="info",
            title=title,
            description=(
                f"No server reported the context window of {self.ctx.model}, so compaction"
                " assumes the usual size for its model family. Set STEERABLE_CONTEXT_WINDOW"
                " to the real size if it differs."
            ),
        )

    def _step_access(self, system: str) -> StepAccess:
        ctx = self.ctx

        async def emit(**fields: Any) -> None:
            await self.emit(ev.Compaction, **fields)
            if fields.get("notice"):  # the breaker opened: the user must know, not only the model
                await self.emit(
                    ev.Notice,
                    severity="warning",
                    title="Automatic compaction is paused",
                    description=fields["notice"],
                )

        return StepAccess(
            events=ctx.log.view,
            history=lambda: ctx.log.history,
            rebuild=lambda: self._request(system),
            emit=emit,
            record=self.emit,
            new_id=self.rec.new_id,
            provider=ctx.provider,
            window=self.window,
            cancel=ctx.cancel,
        )

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
            self.open_text = self.rec.new_id("msg")
            await self.emit(ev.TextStart, message_id=self.open_text)
        self.step_text.append(delta)
        await self.emit(ev.TextDelta, message_id=self.open_text, delta=delta)

    async def _reasoning(self, chunk: ReasoningChunk) -> None:
        if self.open_text is not None:
            await self._end_text()
        if chunk.redacted_data is not None:
            await self._end_reasoning()  # a redacted block is a block of its own
        if self.open_reasoning is None:
            self.open_reasoning = self.rec.new_id("think")
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


def _still_overflowing(error: ProviderError, why: str) -> ProviderError:
    return ProviderError(
        "context_overflow_after_compaction",
        f"the request still does not fit the model's context window ({why}): {error.message}"
        " — start a new session, choose a model with a larger window, or ask for smaller"
        " pieces of work (shorter files, fewer tool results)",
    )
