"""The client validator's last step: ask the person to press stop, then grade the client.

`cancellation(walk)` shows a message and a tool call asking the person to cancel the turn,
and opens a permission request they are told not to answer. Pressing stop in a conforming
client does two things, both graded: it sends `session/cancel` (`cancel.session_cancel`) and
it answers the open permission request with outcome `cancelled`
(`cancel.permission_cancelled`). The wait is bounded by the walk's cancel deadline; a person
who does not act in time, or who answers the request instead of pressing stop, makes the
checks skipped with that reason. Returns whether cancel arrived, which decides the turn's
stop reason.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
from acp import start_tool_call, update_tool_call
from acp.schema import RequestPermissionResponse, ToolCallUpdate

from steerable_bridge.conformance.validators.report import CheckStatus

if TYPE_CHECKING:
    from steerable_bridge.conformance.validators.client_session import WalkSteps

__all__ = ["cancellation"]


async def cancellation(walk: WalkSteps) -> bool:
    """Ask the person to press stop while a permission request is open; grade both."""
    timeout = walk.settings.cancel_timeout
    call_id = f"validator-stop-{walk.nonce}"
    await walk.say(
        f"Please press **stop** (cancel the turn) now — I will wait up to {timeout:g} s. A"
        " permission request is open: do not answer it; pressing stop must answer it for you."
    )
    await walk.send(
        start_tool_call(
            call_id, "Validator: press stop to cancel this turn", kind="other", status="pending"
        )
    )
    tool_call = ToolCallUpdate(
        tool_call_id=call_id,
        title="Validator: press stop (do not answer)",
        kind="other",
        status="pending",
    )
    options = walk.permission_options("stop-test")
    answered = anyio.Event()
    result: list[tuple[RequestPermissionResponse | None, str]] = []
    started = time.monotonic()

    async def ask() -> None:
        result.append(await walk.ask(tool_call, options))
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await _first(walk.session.cancelled, answered, within=timeout)
        if walk.session.cancelled.is_set() or (answered.is_set() and _is_cancelled(result)):
            # The stop press answers both; let the other half arrive (bounded).
            await _first(
                answered if walk.session.cancelled.is_set() else walk.session.cancelled,
                within=walk.settings.probe_timeout,
            )
        tg.cancel_scope.cancel()
    _grade_cancel(walk, result, started)
    await walk.send(update_tool_call(call_id, status="failed"))
    return walk.session.cancelled.is_set()


def _grade_cancel(
    walk: WalkSteps, result: list[tuple[RequestPermissionResponse | None, str]], started: float
) -> None:
    cancelled = walk.session.cancelled.is_set()
    timeout = walk.settings.cancel_timeout
    if cancelled:
        after = (walk.session.cancelled_at or time.monotonic()) - started
        walk.log.record(
            "cancel.session_cancel",
            "pass",
            f"client sent session/cancel {after:.1f} s after the stop prompt",
        )
    elif result and result[0][0] is not None and result[0][0].outcome.outcome == "cancelled":
        walk.log.record(
            "cancel.session_cancel",
            "fail",
            "the permission request was answered cancelled, but no session/cancel followed",
        )
    else:
        walk.log.record(
            "cancel.session_cancel", "skipped", f"person did not act in time ({timeout:g} s)"
        )
    if not result:
        status: CheckStatus = "fail" if cancelled else "skipped"
        why = (
            "after session/cancel the open permission request stayed unanswered for"
            f" {walk.settings.probe_timeout:g} s"
            if cancelled
            else f"person did not act in time ({timeout:g} s)"
        )
        walk.log.record("cancel.permission_cancelled", status, why)
        return
    answer, problem = result[0]
    if answer is None:
        walk.log.record("cancel.permission_cancelled", "fail", problem)
    elif answer.outcome.outcome == "cancelled":
        walk.log.record(
            "cancel.permission_cancelled",
            "pass",
            "the open permission request was answered with outcome cancelled",
        )
    elif cancelled:
        walk.log.record(
            "cancel.permission_cancelled",
            "fail",
            "after session/cancel the open request was answered selected"
            f" {answer.outcome.option_id!r}; it must be cancelled",
        )
    else:
        walk.log.record(
            "cancel.permission_cancelled",
            "skipped",
            "the person answered the request instead of pressing stop",
        )


async def _first(*events: anyio.Event, within: float) -> None:
    """Return when any of `events` is set, or after `within` seconds."""
    with anyio.move_on_after(within):
        async with anyio.create_task_group() as tg:

            async def wait(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            for event in events:
                tg.start_soon(wait, event)


def _is_cancelled(result: list[tuple[RequestPermissionResponse | None, str]]) -> bool:
    return bool(result) and result[0][0] is not None and result[0][0].outcome.outcome == "cancelled"
