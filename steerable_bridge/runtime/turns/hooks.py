"""Hooks: user code that may change what a turn does at five named points.

A `Hook` is a named bundle of optional callables, registered on `Agent.hooks` (a scoped
registry: global, or one session's scope) or loaded from a `--hooks-module` file exposing
`HOOKS` or `hooks()`. Each callable may be sync or async and receives a `HookContext`:

- `pre_step(request, ctx)`: a waterfall before each model call. Return a new `ModelRequest`
  (other messages or tools), `Reject(reason)` to end the turn before the call, or None.
- `post_step(step, ctx)`: observes each model call's outcome (`StepReport`); returns nothing.
- `before_tool(call, ctx)`: `Veto(reason)` (the call fails with code `vetoed` and never
  runs or asks permission), `Rewrite(arguments)` (it runs with these arguments), or None.
- `after_tool(call, result, ctx)`: a new `ToolResult` replaces what the model sees, or None.
- `before_completion(draft, ctx)`: the model's draft final answer; `Accept()`/None ends the
  turn, `Retry(message)` shows `message` to the model and runs another step, `Narrate()` asks
  the model, with tools closed, to say what it did. Retries are bounded per turn.

Hooks run in registration order (global first, nearer scopes later). Every decision that
changes something is logged as a `hook_action` event by `HookRunner`, the per-turn object
the loop and the tool batch call; a hook that raises is logged and treated as "no change",
so a buggy hook never breaks a turn; one call may take at most `HOOK_TIMEOUT_S`. This
module never imports an adapter.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import FinishReason, ModelRequest
from steerable_bridge.runtime.ports.tools import ToolResult
from steerable_bridge.runtime.values import ToolCall, Usage, canonical_json

__all__ = [
    "Accept",
    "AfterTool",
    "BeforeCompletion",
    "BeforeTool",
    "CompletionDecision",
    "Hook",
    "HookContext",
    "HookRunner",
    "Narrate",
    "PostStep",
    "PreStep",
    "Reject",
    "Retry",
    "Rewrite",
    "StepRejected",
    "StepReport",
    "Veto",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=ev.EventBase)

HOOK_TIMEOUT_S = 30.0
"""How long one hook call may take; a slower one is logged as `hook_error` and ignored."""

NARRATE_MESSAGE = (
    "Before you finish: tell the user, in a few sentences, what you did in this turn, what"
    " you found and what is left to do. Do not call tools."
)
"""What the model is asked when a hook answers `Narrate()`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HookContext:
    """Where a hook runs: the session, the run, the step (0 before the first) and model."""

    session_id: str
    run_id: str
    step: int
    model: str
    cwd: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StepReport:
    """What one model call produced, for `post_step`."""

    step: int
    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage


@dataclass(frozen=True, slots=True)
class Reject:
    """`pre_step`: do not call the model; end the turn (stop reason `end_turn`)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Veto:
    """`before_tool`: the call fails with `reason` and never runs."""

    reason: str


@dataclass(frozen=True, slots=True)
class Rewrite:
    """`before_tool`: run the call with these arguments instead."""

    arguments: dict[str, Any]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Accept:
    """`before_completion`: the draft is the final answer."""


@dataclass(frozen=True, slots=True)
class Retry:
    """`before_completion`: show the model `message` and let it try again."""

    message: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Narrate:
    """`before_completion`: ask the model (tools closed) to describe what it did."""

    reason: str = ""


CompletionDecision = Accept | Retry | Narrate

PreStep = Callable[[ModelRequest, HookContext], "ModelRequest | Reject | Awaitable[Any] | None"]
PostStep = Callable[[StepReport, HookContext], "Awaitable[None] | None"]
BeforeTool = Callable[[ToolCall, HookContext], "Veto | Rewrite | Awaitable[Any] | None"]
AfterTool = Callable[[ToolCall, ToolResult, HookContext], "ToolResult | Awaitable[Any] | None"]
BeforeCompletion = Callable[[str, HookContext], "CompletionDecision | Awaitable[Any] | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hook:
    """A named set of hook callables; leave out the points you do not need."""

    name: str
    pre_step: PreStep | None = None
    post_step: PostStep | None = None
    before_tool: BeforeTool | None = None
    after_tool: AfterTool | None = None
    before_completion: BeforeCompletion | None = None


class StepRejected(Exception):
    """A `pre_step` hook rejected the step; the turn ends with `end_turn`."""

    def __init__(self, hook: str, reason: str) -> None:
        super().__init__(reason)
        self.hook = hook
        self.reason = reason


class Emit(Protocol):
    async def __call__(self, cls: type[E], /, **fields: Any) -> E: ...


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class HookRunner:
    """Runs one turn's hooks in order and logs every decision that changes something."""

    def __init__(
        self,
        hooks: tuple[Hook, ...],
        emit: Emit,
        context: Callable[[], HookContext],
        *,
        max_completion_retries: int = 2,
        timeout_s: float = HOOK_TIMEOUT_S,
    ) -> None:
        self.hooks = hooks
        self.timeout_s = timeout_s
        self.emit = emit
        self.context = context
        self.max_completion_retries = max_completion_retries
        self.completion_retries = 0

    async def _run(self, hook: Hook, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            with anyio.fail_after(self.timeout_s):
                return await _call(fn, *args, self.context())
        except TimeoutError:
            logger.warning("hook %s.%s took over %gs; ignored", hook.name, point, self.timeout_s)
            await self.emit(
                ev.HookAction,
                hook=hook.name,
                action="hook_error",
                detail=f"{point} did not answer within {self.timeout_s:g}s; make it faster",
            )
            return None
        except Exception as error:  # a broken hook must not break the turn
            logger.exception("hook %s.%s raised; treated as no change", hook.name, point)
            await self.emit(
                ev.HookAction,
                hook=hook.name,
                action="hook_error",
                detail=f"{point} raised {type(error).__name__}: {error}",
            )
            return None

    async def pre_step(self, request: ModelRequest) -> ModelRequest:
        """The request after every `pre_step` hook; raises `StepRejected`."""
        for hook in self.hooks:
            if hook.pre_step is None:
                continue
            answer = await self._run(hook, "pre_step", hook.pre_step, request)
            if isinstance(answer, Reject):
                await self.emit(
                    ev.HookAction, hook=hook.name, action="reject", detail=answer.reason
                )
                raise StepRejected(hook.name, answer.reason)
            if isinstance(answer, ModelRequest) and answer != request:
                changed = [
                    name
                    for name in ("messages", "tools", "system", "max_tokens", "temperature")
                    if getattr(answer, name) != getattr(request, name)
                ]
                request = replace(answer, model=request.model)
                await self.emit(
                    ev.HookAction,
                    hook=hook.name,
                    action="rewrite_request",
                    detail="changed " + ", ".join(changed or ["model"]),
                )
        return request

    async def post_step(self, report: StepReport) -> None:
        for hook in self.hooks:
            if hook.post_step is not None:
                await self._run(hook, "post_step", hook.post_step, report)

    async def before_tool(self, call: ToolCall) -> ToolCall | Veto:
        """The call to run (maybe with rewritten arguments), or the veto that stops it."""
        for hook in self.hooks:
            if hook.before_tool is None:
                continue
            answer = await self._run(hook, "before_tool", hook.before_tool, call)
            if isinstance(answer, Veto):
                await self.emit(
                    ev.HookAction,
                    hook=hook.name,
                    action="veto",
                    detail=answer.reason,
                    call_id=call.call_id,
                )
                return answer
            if isinstance(answer, Rewrite):
                arguments = canonical_json(json.loads(json.dumps(answer.arguments)))
                if arguments != call.arguments_json:
                    call = replace(call, arguments_json=arguments)
                    await self.emit(
                        ev.HookAction,
                        hook=hook.name,
                        action="rewrite_arguments",
                        detail=answer.reason or f"arguments now {arguments[:200]}",
                        call_id=call.call_id,
                    )
        return call

    async def after_tool(self, call: ToolCall, result: ToolResult) -> ToolResult:
        for hook in self.hooks:
            if hook.after_tool is None:
                continue
            answer = await self._run(hook, "after_tool", hook.after_tool, call, result)
            if isinstance(answer, ToolResult) and answer != result:
                result = answer
                await self.emit(
                    ev.HookAction,
                    hook=hook.name,
                    action="rewrite_result",
                    call_id=call.call_id,
                )
        return result

    async def before_completion(self, draft: str) -> Retry | Narrate | None:
        """The first hook's retry or narrate (logged), or None to accept the draft.

        After `max_completion_retries` retries / narrations in a turn, drafts are accepted.
        """
        if self.completion_retries >= self.max_completion_retries:
            return None
        for hook in self.hooks:
            if hook.before_completion is None:
                continue
            answer = await self._run(hook, "before_completion", hook.before_completion, draft)
            if isinstance(answer, Retry):
                self.completion_retries += 1
                await self.emit(
                    ev.HookAction,
                    hook=hook.name,
                    action="retry",
                    detail=answer.reason,
                    message=answer.message,
                )
                return answer
            if isinstance(answer, Narrate):
                self.completion_retries += 1
                await self.emit(
                    ev.HookAction,
                    hook=hook.name,
                    action="narrate",
                    detail=answer.reason,
                    message=NARRATE_MESSAGE,
                )
                return answer
        return None
