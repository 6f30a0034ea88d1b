"""The gate between a model's tool call and its handler, for one turn.

`ToolBatch` asks the gate about every call before deciding it (`admit`) and hands it every
result a handler produced (`review`). The gate asks the turn's quality guards first (budget,
error breaker, dedup: they may answer a call without running it) and then the
`before_tool` hooks (veto, or rewritten arguments); results go through the `after_tool`
hooks. `settled` tells the guards a call's result is logged. `OpenGate` lets everything
through unchanged (a turn without guards or hooks). No I/O of its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_quality.quality import TurnGuard
from steerable_bridge.runtime.ports.tools import ToolResult
from steerable_bridge.runtime.turns.hooks import HookRunner, Veto
from steerable_bridge.runtime.values import TextPart, ToolCall, ToolError

__all__ = ["OpenGate", "ToolGate", "TurnGate"]


class ToolGate(Protocol):
    """What a tool batch asks before and after each call."""

    async def admit(self, call: ev.ToolCallEnd) -> ev.ToolCallEnd | ToolResult:
        """The call to decide and run (maybe rewritten), or the result it gets without
        running (no `tool_started`, no permission question)."""
        ...

    async def review(self, call: ev.ToolCallEnd, result: ToolResult) -> ToolResult:
        """The result the model sees for a call that ran."""
        ...

    def settled(self) -> None:
        """The results of the calls admitted so far are logged."""
        ...


class OpenGate:
    """Admits every call and keeps every result."""

    async def admit(self, call: ev.ToolCallEnd) -> ev.ToolCallEnd | ToolResult:
        return call

    async def review(self, call: ev.ToolCallEnd, result: ToolResult) -> ToolResult:
        return result

    def settled(self) -> None:
        return None


class TurnGate:
    """The quality guards, then the hooks; see the module docstring."""

    def __init__(self, guard: TurnGuard, hooks: HookRunner) -> None:
        self.guard = guard
        self.hooks = hooks

    async def admit(self, call: ev.ToolCallEnd) -> ev.ToolCallEnd | ToolResult:
        answer = await self.guard.before_tool(call)
        if answer is not None:
            return answer
        plain = ToolCall(call_id=call.call_id, name=call.name, arguments_json=call.arguments_json)
        decided = await self.hooks.before_tool(plain)
        if isinstance(decided, Veto):
            message = f"the call was vetoed and did not run: {decided.reason}"
            return ToolResult(
                content=(TextPart(text=message),), error=ToolError(code="vetoed", message=message)
            )
        if decided.arguments_json != call.arguments_json:
            return replace(call, arguments_json=decided.arguments_json)
        return call

    async def review(self, call: ev.ToolCallEnd, result: ToolResult) -> ToolResult:
        plain = ToolCall(call_id=call.call_id, name=call.name, arguments_json=call.arguments_json)
        return await self.hooks.after_tool(plain, result)

    def settled(self) -> None:
        self.guard.after_result()
