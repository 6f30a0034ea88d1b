"""The turn / step loop: user input in, a typed LoopEvent stream out, every event logged.

`run_turn` reads top to bottom as the turn it runs:

1. `run_started`; settle tool calls an earlier run left open (frontend tool results,
   approvals given through `resume`, anything unanswered gets a `cancelled` result);
   the client's shared state (`state_snapshot`) and the user's message (`user_message`,
   plus `session_info` with a title on the first prompt).
2. Each step: inject queued steering (`steer_applied`); snapshot tools and prompt; log the
   full `model_request`; stream the provider, logging every chunk as text / reasoning /
   tool-call events; `model_response` and `usage_updated`; run the tool calls in order
   (permission first when needed; parallel-safe calls concurrently, results still logged in
   call order); `step_finished`.
3. The turn ends when the model stops without tool calls and no steering or follow-up
   waits (either starts another step otherwise), at `max_steps`, on cancel, or when
   a call must be answered by the client (`interrupted`). It ends with exactly one
   `run_finished` or `run_failed`, after closing whatever was open: text, reasoning, tool
   calls (a synthetic `cancelled` result for each call that never finished) and the step.

The loop does no I/O of its own: events go to the session log and to the caller's `sink`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import jsonpatch
from pydantic import JsonValue

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.cancel import CancelToken
from steerable_bridge.runtime.environment import Environment
from steerable_bridge.runtime.events import LoopEvent, StopReason
from steerable_bridge.runtime.log import SessionLog
from steerable_bridge.runtime.model import (
    FinishReason,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.permissions import PermissionPolicy, PermissionRequest
from steerable_bridge.runtime.projection import SessionFacts, project_history
from steerable_bridge.runtime.steering import InputQueue
from steerable_bridge.runtime.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import (
    ContentPart,
    Interrupt,
    Location,
    PlanEntry,
    TextPart,
    ToolCall,
    ToolContent,
    ToolError,
    ToolKind,
    Usage,
    canonical_json,
)

__all__ = [
    "ClientToolResult",
    "EventSink",
    "LoopSettings",
    "ResumeDecision",
    "RunOutcome",
    "TurnContext",
    "TurnInput",
    "run_turn",
]

E = TypeVar("E", bound=ev.EventBase)
EventSink = Callable[[LoopEvent], Awaitable[None]]

_STRUCTURAL: frozenset[type[ev.EventBase]] = frozenset(
    {
        ev.RunStarted, ev.RunFinished, ev.RunFailed, ev.StepFinished, ev.ToolCallEnd,
        ev.ToolStarted, ev.ToolFinished, ev.PermissionRequested, ev.PermissionResolved,
        ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied, ev.ModelRequestEvent,
    }
)  # fmt: skip
"""Kinds committed to the store at once; streaming deltas are batched."""

_STOP_FOR_FINISH: dict[FinishReason, StopReason] = {
    "end_turn": "end_turn",
    "tool_calls": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "cancelled": "cancelled",
    "error": "end_turn",
}

APPROVAL_SCHEMA = canonical_json(
    {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
    }
)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """What starts a turn. Every field may be empty: a run may only answer open calls."""

    content: tuple[ContentPart, ...] = ()
    message_id: str | None = None
    tool_results: tuple[ClientToolResult, ...] = ()
    resume: tuple[ResumeDecision, ...] = ()
    state_json: str | None = None
    """Shared state the client sends (AG-UI `state`), logged as `state_snapshot`."""
    client_tools: tuple[Tool, ...] = ()
    """Tools the client runs itself for this turn (AG-UI `tools`)."""


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


@dataclass(slots=True, kw_only=True)
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
    snapshot: Callable[[], tuple[str, tuple[Tool, ...]]] | None = None
    """Called before every step: the system prompt and tools as registered now, so a change
    made during a step reaches the next one. None: `system` and `tools` hold for the turn."""


async def run_turn(ctx: TurnContext, turn: TurnInput) -> RunOutcome:
    """Run one turn to its end; never raises for failures the log can record."""
    t = _Turn(ctx, turn)
    await t.emit(ev.RunStarted, model=ctx.model)
    try:
        await t.settle_open_calls()
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
        step = 0
        while True:
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            for content in ctx.steering.take():
                await t.emit(ev.SteerApplied, message_id=t.new_id("steer"), content=content)
            if step >= ctx.settings.max_steps:
                await t.emit(
                    ev.BudgetExhausted, budget="steps", limit=ctx.settings.max_steps, used=step
                )
                return await t.finish("max_steps")
            step += 1
            finish_reason, calls = await t.model_step(step)
            if ctx.cancel.cancelled:
                return await t.finish("cancelled")
            if calls:
                await t.run_tools(calls)
                await t.end_step(finish_reason)
                if ctx.cancel.cancelled:
                    return await t.finish("cancelled")
                if t.pending or t.interrupts:
                    return await t.finish("interrupted")
                continue
            await t.end_step(finish_reason)
            if len(ctx.steering):
                continue  # steering that arrived during the last step is applied, not dropped
            follow_ups = ctx.follow_ups.take()
            if follow_ups:
                for content in follow_ups:
                    await t.emit(ev.FollowUpApplied, message_id=t.new_id("user"), content=content)
                continue
            return await t.finish(_STOP_FOR_FINISH[finish_reason])
    except ProviderError as error:
        return await t.fail(error.code, error.message)
    except Exception as error:  # a bug: log it so the session stays consistent, then report
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
        self.pending: list[str] = []
        self.interrupts: list[Interrupt] = []
        self.deferred: set[str] = set()
        self.tools: dict[str, Tool] = {}
        self._last_commit = time.monotonic()

    def new_id(self, prefix: str) -> str:
        return self.ctx.settings.new_id(prefix)

    async def emit(self, cls: type[E], **fields: Any) -> E:
        event = self.ctx.log.record(cls, self.run_id, **fields)
        self.ctx.facts.observe(event)  # type: ignore[arg-type]
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
        system, registered = ctx.snapshot() if ctx.snapshot else (ctx.system, ctx.tools)
        self.tools = {tool.name: tool for tool in registered + self.turn.client_tools}
        request = ModelRequest(
            model=ctx.model,
            system=system,
            messages=project_history(ctx.log.view()),
            tools=tuple(tool.spec() for tool in self.tools.values()),
        )
        self.step = step
        await self.emit(ev.StepStarted, step=step)
        await self.emit(ev.ModelRequestEvent, step=step, request=request)
        response: ModelResponse | None = None
        assistant_id = self.new_id("msg")
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
                        if isinstance(item, TextChunk):
                            await self._text(item.delta)
                        elif isinstance(item, ReasoningChunk):
                            await self._reasoning(item.delta)
                        elif isinstance(item, ToolCallChunk):
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
            size=ctx.provider.info.context_window,
        )
        finish: FinishReason = "tool_calls" if calls else response.finish_reason
        return finish, calls

    async def _text(self, delta: str) -> None:
        if self.open_reasoning is not None:
            await self._end_reasoning()
        if self.open_text is None:
            self.open_text = self.new_id("msg")
            await self.emit(ev.TextStart, message_id=self.open_text)
        await self.emit(ev.TextDelta, message_id=self.open_text, delta=delta)

    async def _reasoning(self, delta: str) -> None:
        if self.open_text is not None:
            await self._end_text()
        if self.open_reasoning is None:
            self.open_reasoning = self.new_id("think")
            await self.emit(ev.ReasoningStart, message_id=self.open_reasoning)
        await self.emit(ev.ReasoningDelta, message_id=self.open_reasoning, delta=delta)

    async def _tool_chunk(self, chunk: ToolCallChunk, assistant_id: str) -> None:
        if chunk.call_id not in self.streaming_calls:
            parent = self.open_text or assistant_id
            await self._close_stream()
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

    async def _end_reasoning(self) -> None:
        if self.open_reasoning is not None:
            message_id, self.open_reasoning = self.open_reasoning, None
            await self.emit(ev.ReasoningEnd, message_id=message_id)

    async def _close_stream(self) -> None:
        await self._end_reasoning()
        await self._end_text()

    async def _end_call(self, call_id: str) -> ev.ToolCallEnd:
        name, parts = self.streaming_calls.pop(call_id)
        arguments = "".join(parts)
        tool = self.tools.get(name)
        title: str = name
        locations: tuple[Location, ...] = ()
        kind: ToolKind = "other"
        if tool is not None:
            kind = tool.kind
            args = _parse_object(arguments)
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

    # -- tools ------------------------------------------------------------------------------

    async def run_tools(self, calls: list[ev.ToolCallEnd]) -> None:
        """Decide and run each call in order; consecutive parallel-safe calls run together."""
        group: list[tuple[ev.ToolCallEnd, Tool, dict[str, Any]]] = []
        for call in calls:
            if self.ctx.cancel.cancelled:
                break
            tool = self.tools.get(call.name)
            args = _parse_object(call.arguments_json)
            if (
                tool is not None
                and args is not None
                and tool.parallel_safe
                and tool.executor == "backend"
                and not tool.needs_permission
                and _schema_error(tool, args) is None
            ):
                group.append((call, tool, args))
                continue
            await self._run_group(group)
            group = []
            await self._handle_call(call, tool, args)
        await self._run_group(group)

    async def _handle_call(
        self, call: ev.ToolCallEnd, tool: Tool | None, args: dict[str, Any] | None
    ) -> None:
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            await self._fail_call(
                call.call_id,
                "unknown_tool",
                f"there is no tool named {call.name!r}; tools: {known}",
            )
            return
        if args is None:
            await self._fail_call(
                call.call_id,
                "invalid_arguments",
                f"arguments for {call.name} are not a JSON object: {call.arguments_json[:200]!r};"
                " call it again with a JSON object matching its schema",
            )
            return
        problem = _schema_error(tool, args)
        if problem is not None:
            await self._fail_call(
                call.call_id,
                "invalid_arguments",
                f"arguments for {call.name} do not match its schema: {problem}",
            )
            return
        if tool.executor == "frontend":
            self.pending.append(call.call_id)
            return
        if tool.needs_permission and not await self._permitted(call, tool):
            return
        await self._execute(call, tool, args)

    async def _permitted(self, call: ev.ToolCallEnd, tool: Tool) -> bool:
        """True when the call may run; otherwise its failed result is already logged."""
        ctx = self.ctx
        remembered = ctx.facts.always.get(tool.name)
        if remembered is True:
            return True
        if remembered is False:
            await self._fail_call(
                call.call_id,
                "permission_denied",
                f"the user chose to always reject {tool.name}; do not call it again",
            )
            return False
        request = PermissionRequest(
            session_id=ctx.log.session_id,
            call=_as_call(call),
            tool_kind=tool.kind,
            title=call.title,
        )
        verdict, reason = ctx.policy.verdict(request)
        if verdict == "allow":
            return True
        if verdict == "deny":
            await self._fail_call(call.call_id, "permission_denied", reason)
            return False
        await self.emit(
            ev.PermissionRequested,
            call_id=call.call_id,
            tool_name=tool.name,
            options=request.options,
        )
        if verdict == "defer":
            self.deferred.add(call.call_id)
            self.interrupts.append(
                Interrupt(
                    id=f"approval-{call.call_id}",
                    reason=f"Approve {call.title or tool.name}?",
                    tool_call_id=call.call_id,
                    response_schema_json=APPROVAL_SCHEMA,
                )
            )
            return False
        answer = None
        with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
            answer = await ctx.policy.ask(request)
        if answer is None:
            await self.emit(
                ev.PermissionResolved,
                call_id=call.call_id,
                tool_name=tool.name,
                outcome="cancelled",
            )
            if not ctx.cancel.cancelled:
                await self._fail_call(
                    call.call_id,
                    "permission_timeout",
                    f"nobody answered the permission request within"
                    f" {ctx.settings.permission_timeout_s:g}s, so {tool.name} did not run",
                )
            return False
        await self.emit(
            ev.PermissionResolved,
            call_id=call.call_id,
            tool_name=tool.name,
            outcome=answer.outcome,
            option_id=answer.option_id,
        )
        if answer.outcome in ("allow_once", "allow_always"):
            return True
        if ctx.cancel.cancelled:
            return False
        message = (
            "the user did not allow this call; ask them or try something else"
            if answer.outcome != "cancelled"
            else "the permission request was withdrawn, so the call did not run"
        )
        await self._fail_call(call.call_id, "permission_denied", message)
        return False

    async def _run_group(self, group: list[tuple[ev.ToolCallEnd, Tool, dict[str, Any]]]) -> None:
        if not group:
            return
        if len(group) == 1:
            await self._execute(*group[0])
            return
        results: dict[str, ToolResult | None] = {}
        for call, _, _ in group:
            await self.emit(ev.ToolStarted, call_id=call.call_id)

        async def run_one(call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]) -> None:
            results[call.call_id] = await self._invoke(call, tool, args)

        async with anyio.create_task_group() as tg:
            for item in group:
                tg.start_soon(run_one, *item)
        for call, _, _ in group:
            await self._record_result(call.call_id, results.get(call.call_id))

    async def _execute(self, call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]) -> None:
        await self.emit(ev.ToolStarted, call_id=call.call_id)
        await self._record_result(call.call_id, await self._invoke(call, tool, args))

    async def _invoke(
        self, call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]
    ) -> ToolResult | None:
        """Run the handler; None means it was cancelled."""
        ctx = self.ctx
        tool_ctx = ToolContext(
            session_id=ctx.log.session_id,
            run_id=self.run_id,
            call_id=call.call_id,
            cwd=ctx.cwd,
            environment=ctx.environment,
            output=lambda content: self._tool_output(call.call_id, content),
            update_plan=self._update_plan,
            patch_state=self._patch_state,
            state=lambda: ctx.facts.state,
        )
        result: ToolResult | None = None
        with ctx.cancel.scope():
            try:
                with anyio.fail_after(tool.timeout_s):
                    result = await tool.handler(args, tool_ctx)
            except TimeoutError:
                result = _error_result(
                    "tool_timeout",
                    f"{tool.name} did not finish within {tool.timeout_s:g}s and was stopped",
                )
            except ToolFailure as failure:
                result = _error_result(failure.code, failure.message)
            except Exception as error:
                result = _error_result("tool_exception", f"{tool.name} raised {error!r}")
        return None if ctx.cancel.cancelled and result is None else result

    async def _record_result(self, call_id: str, result: ToolResult | None) -> None:
        if result is None:
            await self._cancel_call(call_id)
            return
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="failed" if result.error is not None else "completed",
            content=result.content,
            raw_output_json=result.raw_output_json,
            error=result.error,
        )

    async def _fail_call(self, call_id: str, code: str, message: str) -> None:
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="failed",
            content=(TextPart(text=message),),
            error=ToolError(code=code, message=message),
        )

    async def _cancel_call(
        self, call_id: str, message: str = "cancelled before it finished"
    ) -> None:
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="cancelled",
            error=ToolError(code="cancelled", message=message),
        )

    async def _tool_output(self, call_id: str, content: tuple[ToolContent, ...]) -> None:
        await self.emit(ev.ToolOutput, call_id=call_id, content=content)

    async def _update_plan(self, entries: tuple[PlanEntry, ...]) -> None:
        await self.emit(ev.PlanUpdated, entries=entries)

    async def _patch_state(self, patch: JsonValue) -> None:
        try:
            jsonpatch.apply_patch(self.ctx.facts.state, patch)  # type: ignore[arg-type]
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as err:
            raise ToolFailure(
                "invalid_patch", f"the JSON Patch does not apply to the current state: {err}"
            ) from err
        await self.emit(ev.StateDelta, patch_json=canonical_json(patch))

    # -- settling and ending ----------------------------------------------------------------

    async def settle_open_calls(self) -> None:
        """Answer calls an earlier run left open, before anything new reaches the model."""
        open_calls = list(self.ctx.facts.open_calls.values())
        if not open_calls:
            return
        results = {r.call_id: r for r in self.turn.tool_results}
        decisions = {d.call_id: d for d in self.turn.resume}
        self.tools = {tool.name: tool for tool in self.ctx.tools + self.turn.client_tools}
        for call in open_calls:
            if self.ctx.cancel.cancelled:
                break
            if call.call_id in results:
                answer = results[call.call_id]
                await self.emit(
                    ev.ToolFinished,
                    call_id=call.call_id,
                    status="failed" if answer.is_error else "completed",
                    content=answer.content,
                )
            elif call.call_id in decisions and call.name in self.tools:
                approved = decisions[call.call_id].approved
                await self.emit(
                    ev.PermissionResolved,
                    call_id=call.call_id,
                    tool_name=call.name,
                    outcome="allow_once" if approved else "reject_once",
                    option_id="allow_once" if approved else "reject_once",
                )
                args = _parse_object(call.arguments_json)
                if approved and args is not None:
                    await self._execute(call, self.tools[call.name], args)
                else:
                    await self._fail_call(
                        call.call_id, "permission_denied", "the user did not approve this call"
                    )
            else:
                await self._cancel_call(
                    call.call_id, "no result was given for this call before the next message"
                )

    async def _close_open(self, finish_reason: FinishReason) -> None:
        """Close whatever is open so the log never holds a dangling start or call."""
        await self._close_stream()
        for call_id in list(self.streaming_calls):
            await self._end_call(call_id)
        waiting = set(self.pending) | self.deferred
        for call_id in list(self.ctx.facts.open_calls):
            if call_id not in waiting:
                await self._cancel_call(call_id)
        await self.end_step(finish_reason)

    async def finish(self, stop_reason: StopReason) -> RunOutcome:
        with anyio.CancelScope(shield=True):
            await self._close_open("cancelled" if stop_reason == "cancelled" else "end_turn")
            await self.emit(
                ev.RunFinished,
                stop_reason=stop_reason,
                usage=self.usage,
                pending_tool_call_ids=tuple(self.pending) if stop_reason == "interrupted" else (),
                interrupts=tuple(self.interrupts) if stop_reason == "interrupted" else (),
            )
        return RunOutcome(run_id=self.run_id, stop_reason=stop_reason, usage=self.usage)

    async def fail(self, code: str, message: str) -> RunOutcome:
        with anyio.CancelScope(shield=True):
            self.pending.clear()
            self.deferred.clear()
            await self._close_open("error")
            await self.emit(ev.RunFailed, code=code, message=message)
        return RunOutcome(
            run_id=self.run_id,
            stop_reason=None,
            usage=self.usage,
            error_code=code,
            error_message=message,
        )


def _parse_object(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _schema_error(tool: Tool, args: dict[str, Any]) -> str | None:
    import jsonschema  # imported on first use: it costs ~100 ms of every process start

    validator = jsonschema.Draft202012Validator(dict(tool.parameters))
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


def _error_result(code: str, message: str) -> ToolResult:
    return ToolResult(
        content=(TextPart(text=message),), error=ToolError(code=code, message=message)
    )


def _as_call(call: ev.ToolCallEnd) -> ToolCall:
    return ToolCall(call_id=call.call_id, name=call.name, arguments_json=call.arguments_json)


def _title(content: tuple[ContentPart, ...]) -> str:
    text = " ".join(p.text for p in content if isinstance(p, TextPart)).strip()
    text = " ".join(text.split())
    if not text:
        return "New session"
    return text if len(text) <= 60 else text[:57] + "..."
