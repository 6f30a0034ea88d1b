"""The permission decision for one tool call: what to ask, and what the answer means.

`decide` is consulted by the turn's tool batch (`tool_batch.py`) before it runs a call of a
tool that is not read-only, or of a `fetch` tool. A remembered "always" answer wins — the
session's own, then the project's `ApprovalMemory` (`approvals.py`) — and then the session's
permission policy (its mode) gives a verdict: `allow` and `deny` settle the call, `defer`
leaves it open as an approval interrupt answered by `APPROVAL_SCHEMA`, and `ask` puts the
request to the client under the turn's cancel token and the permission timeout. A `fetch`
tool never asks; only a `deny` (read-only mode) keeps it off the network. An "always" answer
is logged with the call's approval key (the session keeps it from there) and kept for the
project; one without a key counts once. "Reject and stop" (`STOP_OPTION`) stops the turn.
`resolve_resume` reads an AG-UI client's resume answer to a deferred call the same way. The
decision logs `permission_requested` and `permission_resolved`; what then becomes of the call
(it runs, fails, waits or stops the turn) is the batch's to do, from the `Decision` returned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.tool_calls.approvals import approval_key, approval_options
from steerable_bridge.runtime.turns.turn import Emit, ResumeDecision, TurnContext
from steerable_bridge.runtime.values import Interrupt, ToolCall, canonical_json

__all__ = ["APPROVAL_SCHEMA", "STOP_OPTION", "Decision", "decide", "resolve_resume"]

log = logging.getLogger(__name__)

APPROVAL_SCHEMA = canonical_json(
    {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "stop": {"type": "boolean"},
            "always": {"type": "boolean"},
        },
        "required": ["approved"],
    }
)
"""What an approval interrupt's answer must look like (AG-UI `resume[].payload`);
`{"approved": false, "stop": true}` rejects the call and stops the turn; `"always": true`
keeps the answer for calls of that kind (where they have an approval key)."""

STOP_OPTION = "reject_stop"
"""The option id of "Reject and stop": the call does not run and the turn ends `rejected`."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the batch does with the call: `run` it, `fail` it with `code` and `message` (the
    result the model sees), `defer` it (leave it open and raise `interrupt`), `stop` the turn,
    or `drop` it (the turn was cancelled meanwhile: the loop closes the call)."""

    action: Literal["run", "fail", "defer", "stop", "drop"]
    code: str = ""
    message: str = ""
    interrupt: Interrupt | None = None


RUN = Decision("run")
STOP = Decision("stop")
DROP = Decision("drop")


def _denied(message: str) -> Decision:
    return Decision("fail", "permission_denied", message)


async def decide(
    ctx: TurnContext, emit: Emit, call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]
) -> Decision:
    """May the call run? Remembered answers first, then the policy's verdict, then the client.

    Fetch tools never ask, but the policy may forbid them (read-only mode)."""
    key = approval_key(tool.name, args)
    remembered = await _recall(ctx, key)
    if remembered is True and tool.needs_permission:
        return RUN
    if remembered is False:
        return _denied(f"the user chose to always reject {tool.name} here; do not call it again")
    request = PermissionRequest(
        session_id=ctx.log.session_id,
        call=ToolCall(call_id=call.call_id, name=call.name, arguments_json=call.arguments_json),
        tool_kind=tool.kind,
        title=call.title,
        options=approval_options(tool.name, key),
    )
    verdict, reason = ctx.policy.verdict(request)
    if verdict == "allow" or (not tool.needs_permission and verdict != "deny"):
        return RUN
    if verdict == "deny":
        return _denied(reason)
    await emit(
        ev.PermissionRequested,
        call_id=call.call_id,
        tool_name=tool.name,
        options=request.options,
    )
    if verdict == "defer":
        interrupt = Interrupt(
            id=f"approval-{call.call_id}",
            reason=f"Approve {call.title or tool.name}?",
            tool_call_id=call.call_id,
            response_schema_json=APPROVAL_SCHEMA,
        )
        return Decision("defer", interrupt=interrupt)
    return await _ask(ctx, emit, request, tool, key)


async def _recall(ctx: TurnContext, key: str | None) -> bool | None:
    """The "always" answer kept for `key`: the session's own, else the project's (bounded)."""
    if key is None:
        return None
    remembered = ctx.facts.always.get(key)
    if remembered is None and ctx.approvals is not None:
        with anyio.move_on_after(10):
            remembered = await ctx.approvals.recall(ctx.cwd, key)
    return remembered


async def _ask(
    ctx: TurnContext, emit: Emit, request: PermissionRequest, tool: Tool, key: str | None
) -> Decision:
    """Put the request to the client, bounded by the permission timeout; log its answer."""
    call_id = request.call.call_id
    answer: PermissionAnswer | None = None
    with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
        answer = await ctx.policy.ask(request)
    if answer is None:
        await emit(ev.PermissionResolved, call_id=call_id, tool_name=tool.name, outcome="cancelled")
        if ctx.cancel.cancelled:
            return DROP
        return Decision(
            "fail",
            "permission_timeout",
            f"nobody answered the permission request within"
            f" {ctx.settings.permission_timeout_s:g}s, so {tool.name} did not run",
        )
    outcome = answer.outcome
    if key is None and outcome in ("allow_always", "reject_always"):
        outcome = "allow_once" if outcome == "allow_always" else "reject_once"  # not kept
    await emit(
        ev.PermissionResolved,
        call_id=call_id,
        tool_name=tool.name,
        outcome=outcome,
        option_id=answer.option_id,
        approval_key=key,
    )
    if outcome in ("allow_always", "reject_always") and key is not None:
        await _remember(ctx, key, outcome == "allow_always")
    if outcome in ("allow_once", "allow_always"):
        return RUN
    if ctx.cancel.cancelled:
        return DROP
    if answer.option_id == STOP_OPTION:
        return STOP
    if answer.outcome == "cancelled":
        return _denied("the permission request was withdrawn, so the call did not run")
    return _denied("the user did not allow this call; ask them or try something else")


async def resolve_resume(
    ctx: TurnContext,
    emit: Emit,
    call: ev.ToolCallEnd,
    reply: ResumeDecision,
    args: dict[str, Any] | None,
) -> Decision:
    """Log the client's resume answer to a deferred call and keep an "always" one.

    `run` when approved (and the arguments parse), `stop` for "Reject and stop", else
    `fail`."""
    approved = reply.approved
    stop = not approved and reply.stop
    key = None
    if reply.always and not stop and args is not None:
        key = approval_key(call.name, args)  # None: asked about every time
    once = "allow_once" if approved else "reject_once"
    outcome = once if key is None else "allow_always" if approved else "reject_always"
    await emit(
        ev.PermissionResolved,
        call_id=call.call_id,
        tool_name=call.name,
        outcome=outcome,
        option_id=STOP_OPTION if stop else outcome,
        approval_key=key,
    )
    if key is not None:
        await _remember(ctx, key, approved)
    if approved and args is not None:
        return RUN
    if stop:
        return STOP
    return _denied("the user did not approve this call")


async def _remember(ctx: TurnContext, key: str, allow: bool) -> None:
    """Keep an "always" answer for the project too (bounded; a failure is only logged)."""
    if ctx.approvals is None:
        return
    try:
        with anyio.fail_after(10):
            await ctx.approvals.remember(ctx.cwd, key, allow)
    except Exception:
        log.warning("could not keep the project's approval for %s", key, exc_info=True)
