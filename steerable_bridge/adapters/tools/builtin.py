"""Built-in tools every session has: `calculate`, `update_plan`, and (AG-UI) `update_state`.

`calculate` evaluates arithmetic safely (an AST walk over numbers and + - * / // % **,
no names, no calls). `update_plan` replaces the session's plan, which both transports show
(ACP `plan`, AG-UI plan activity). `update_state` applies a JSON Patch to the AG-UI shared
state, streamed to the client as STATE_DELTA.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolFailure, ToolResult
from steerable_bridge.runtime.values import PlanEntry, TextPart, canonical_json

__all__ = ["CALCULATE", "UPDATE_PLAN", "UPDATE_STATE", "builtin_tools"]

_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolFailure("too_large", "exponents above 100 are not allowed")
        result: float | int = _OPS[type(node.op)](left, right)
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        value: float | int = _OPS[type(node.op)](_evaluate(node.operand))
        return value
    raise ToolFailure(
        "invalid_expression", "only numbers and + - * / // % ** and parentheses are allowed"
    )


async def _calculate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    expression = str(args["expression"])
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError as err:
        raise ToolFailure(
            "invalid_expression", f"{expression!r} is not arithmetic: {err.msg}"
        ) from err
    except ZeroDivisionError as err:
        raise ToolFailure("division_by_zero", f"{expression!r} divides by zero") from err
    return ToolResult(
        content=(TextPart(text=f"{expression} = {value}"),),
        raw_output_json=canonical_json({"value": value}),
    )


CALCULATE = Tool(
    name="calculate",
    description="Evaluate an arithmetic expression such as '2 * (3 + 4)'.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "The arithmetic"}},
        "required": ["expression"],
    },
    kind="think",
    handler=_calculate,
    parallel_safe=True,
    timeout_s=5.0,
    title=lambda args: f"Calculate {args['expression']}",
)


async def _update_plan(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    entries = tuple(
        PlanEntry(
            content=str(item["content"]),
            priority=item.get("priority", "medium"),
            status=item.get("status", "pending"),
        )
        for item in args["entries"]
    )
    await ctx.update_plan(entries)
    done = sum(1 for e in entries if e.status == "completed")
    return ToolResult(
        content=(TextPart(text=f"Plan updated: {len(entries)} entries, {done} done."),)
    )


UPDATE_PLAN = Tool(
    name="update_plan",
    description="Replace the plan shown to the user. Send every entry each time.",
    parameters={
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string"},
                        "priority": {"enum": ["high", "medium", "low"]},
                        "status": {"enum": ["pending", "in_progress", "completed"]},
                    },
                    "required": ["content"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["entries"],
    },
    kind="think",
    handler=_update_plan,
    timeout_s=5.0,
    title=lambda args: f"Update plan ({len(args['entries'])} entries)",
)


async def _update_state(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    await ctx.patch_state(args["patch"])
    return ToolResult(
        content=(TextPart(text="State updated."),), raw_output_json=canonical_json(ctx.state())
    )


def _state_title(args: Mapping[str, Any]) -> str:
    count = len(args["patch"])
    return f"Update shared state ({count} operation{'' if count == 1 else 's'})"


UPDATE_STATE = Tool(
    name="update_state",
    description="Change the shared state the web app shows, with a JSON Patch (RFC 6902).",
    parameters={
        "type": "object",
        "properties": {
            "patch": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"enum": ["add", "remove", "replace", "move", "copy", "test"]},
                        "path": {"type": "string"},
                        "from": {"type": "string"},
                        "value": {},
                    },
                    "required": ["op", "path"],
                },
            }
        },
        "required": ["patch"],
    },
    kind="think",
    handler=_update_state,
    timeout_s=5.0,
    title=_state_title,
)


def builtin_tools(*, shared_state: bool = False) -> tuple[Tool, ...]:
    """The built-ins for a transport; `shared_state` adds `update_state` (AG-UI)."""
    return (CALCULATE, UPDATE_PLAN, UPDATE_STATE) if shared_state else (CALCULATE, UPDATE_PLAN)
