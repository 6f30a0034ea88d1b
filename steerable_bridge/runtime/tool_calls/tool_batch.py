"""One turn's tool calls: check each (known? valid? allowed?), run it, log the result.

`ToolBatch` is the half of a turn that happens after the model stops talking. For each
completed call, in the order the model made them: an unknown tool, a call without a name or
whose arguments are not a JSON object (`model_protocol_error`) and arguments that do not
match the tool's schema (`invalid_arguments`, checked by a validator compiled once per tool)
become a failed result the model sees next step; a frontend tool is left pending for the
client; an `ask_user` call puts its question to the person (`ask_user.py`); a tool that is
not read-only, and a `fetch` tool, first gets a permission decision (`decision.py`), and the
batch does what it says: run the call, log its failed result, leave it open as an approval
interrupt, or stop — "Reject and stop" fails the call, skips the rest of the batch and sets
`stopped`, so the turn ends `rejected`; then the handler runs under the turn's cancel token
and the tool's timeout. Consecutive parallel-safe, read-only calls run concurrently, with
their results still logged in call order. Before any of that, the turn's gate (`gate.py`:
quality guards and `before_tool` hooks) may answer a call without running it, or rewrite its
arguments; a handler's result passes the gate's `after_tool` hooks, then has any lone UTF-16
surrogate in its text replaced with U+FFFD (`surrogates.py`; logged as a `hook_action`), so
no tool can hand the log text it cannot store. `settle` answers calls an earlier run left
open (an approval's resume goes through `decision.py`, a question's reply through
`ask_user.py`). Every call ends with exactly one `tool_finished`, except those deliberately
left waiting for the client.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import jsonpatch
from pydantic import JsonValue

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.surrogates import (
    REPAIR_ACTION,
    REPAIR_HOOK,
    repair_detail,
    scrub_values,
)
from steerable_bridge.runtime.model_quality.quality import call_key
from steerable_bridge.runtime.ports.questions import (
    ASK_USER_NAME,
    QuestionAnswer,
    question_id_for,
)
from steerable_bridge.runtime.ports.tools import (
    Tool,
    ToolContext,
    ToolFailure,
    ToolResult,
    parse_arguments,
)
from steerable_bridge.runtime.tool_calls.ask_user import answered, put_question
from steerable_bridge.runtime.tool_calls.bounding import bound_content
from steerable_bridge.runtime.tool_calls.decision import Decision, decide, resolve_resume
from steerable_bridge.runtime.tool_calls.gate import OpenGate, ToolGate
from steerable_bridge.runtime.turns.turn import Emit, TurnContext, TurnInput
from steerable_bridge.runtime.values import (
    Interrupt,
    PlanEntry,
    Sandbox,
    TextPart,
    ToolContent,
    ToolError,
    canonical_json,
)

__all__ = ["ToolBatch"]

log = logging.getLogger(__name__)


class ToolBatch:
    """Tool handling for one turn; `pending` and `interrupts` say what waits for the client."""

    def __init__(
        self,
        ctx: TurnContext,
        turn: TurnInput,
        run_id: str,
        emit: Emit,
        gate: ToolGate | None = None,
    ) -> None:
        self.ctx = ctx
        self.turn = turn
        self.run_id = run_id
        self.emit = emit
        self.gate: ToolGate = gate or OpenGate()
        self.tools: dict[str, Tool] = {}
        self.pending: list[str] = []
        self.interrupts: list[Interrupt] = []
        self.deferred: set[str] = set()
        self.stopped = False
        """The user rejected a call and asked to stop the turn (it ends `rejected`)."""

    @property
    def waiting(self) -> set[str]:
        """Calls deliberately left open for the client to answer in its next run."""
        return set(self.pending) | self.deferred

    async def run(self, calls: list[ev.ToolCallEnd]) -> None:
        """Decide and run each call in order; consecutive parallel-safe calls run together."""
        group: list[tuple[ev.ToolCallEnd, Tool, dict[str, Any]]] = []
        for call in calls:
            if self.ctx.cancel.cancelled or self.stopped:
                break
            key = call_key(call.name, call.arguments_json)
            if key is not None and any(
                call_key(c.name, c.arguments_json) == key for c, *_ in group
            ):
                await self._run_group(group)  # the earlier twin's result must exist first
                group = []
            admitted = await self.gate.admit(call)
            if isinstance(admitted, ToolResult):
                await self._run_group(group)
                group = []
                await self._record(call.call_id, admitted)
                self.gate.settled()
                continue
            call = admitted
            tool = self.tools.get(call.name)
            args = parse_arguments(call.arguments_json)
            if (
                tool is not None
                and args is not None
                and tool.parallel_safe
                and tool.executor == "backend"
                and not tool.needs_permission
                and tool.kind != "fetch"
                and tool.argument_error(args) is None
            ):
                group.append((call, tool, args))
                continue
            await self._run_group(group)
            group = []
            await self._handle(call, tool, args)
            self.gate.settled()
        await self._run_group(group)

    async def _handle(
        self, call: ev.ToolCallEnd, tool: Tool | None, args: dict[str, Any] | None
    ) -> None:
        if tool is None and not call.name:
            known = ", ".join(sorted(self.tools)) or "none"
            await self.fail(
                call.call_id,
                "model_protocol_error",
                f"this tool call has no tool name (arguments {call.arguments_json[:200]!r});"
                f" call one of these tools by name: {known}",
            )
            return
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            await self.fail(
                call.call_id,
                "unknown_tool",
                f"there is no tool named {call.name!r}; tools: {known}",
            )
            return
        if args is None:
            await self.fail(
                call.call_id,
                "model_protocol_error",
                f"arguments for {call.name} are not a JSON object: {call.arguments_json[:200]!r};"
                " call it again with a JSON object matching its schema",
            )
            return
        problem = tool.argument_error(args)
        if problem is not None:
            await self.fail(
                call.call_id,
                "invalid_arguments",
                f"arguments for {call.name} do not match its schema: {problem}",
            )
            return
        if tool.executor == "frontend":
            self.pending.append(call.call_id)
            return
        if tool.name == ASK_USER_NAME and self.ctx.questions is not None:
            asked = await put_question(self.ctx, self.emit, call, args)
            if asked is not None:
                await self._follow(call.call_id, asked)
            return
        if (tool.needs_permission or tool.kind == "fetch") and not await self._permitted(
            call, tool, args
        ):
            return
        await self.execute(call, tool, args)

    async def _permitted(self, call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]) -> bool:
        """True when the call may run (`decision.py` decides); otherwise its result is
        logged, or it was left open for the client, or the turn stops."""
        return await self._follow(call.call_id, await decide(self.ctx, self.emit, call, tool, args))

    async def _follow(self, call_id: str, decision: Decision) -> bool:
        """Do what a decision says; True when the call is to run now."""
        if decision.action == "run":
            return True
        if decision.action == "fail":
            await self.fail(call_id, decision.code, decision.message)
        elif decision.action == "stop":
            await self.stop(call_id)
        elif decision.action == "defer":
            assert decision.interrupt is not None
            self.deferred.add(call_id)
            self.interrupts.append(decision.interrupt)
        return False

    async def stop(self, call_id: str) -> None:
        """The user rejected `call_id` and stopped the turn: log its result, end the batch."""
        self.stopped = True
        await self.fail(
            call_id,
            "permission_denied",
            "the user rejected this call and stopped the turn; wait for their next message",
        )

    async def _run_group(self, group: list[tuple[ev.ToolCallEnd, Tool, dict[str, Any]]]) -> None:
        if not group:
            return
        if len(group) == 1:
            await self.execute(*group[0])
            self.gate.settled()
            return
        results: dict[str, ToolResult | None] = {}
        for call, tool, _ in group:
            await self.emit(ev.ToolStarted, call_id=call.call_id, sandbox=await self._sandbox(tool))

        async def run_one(call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]) -> None:
            results[call.call_id] = await self._invoke(call, tool, args)

        async with anyio.create_task_group() as tg:
            for item in group:
                tg.start_soon(run_one, *item)
        for call, _, _ in group:
            await self._record(call.call_id, results.get(call.call_id))
        self.gate.settled()

    async def execute(self, call: ev.ToolCallEnd, tool: Tool, args: dict[str, Any]) -> None:
        """Run one allowed call: `tool_started`, the handler, `tool_finished`."""
        await self.emit(ev.ToolStarted, call_id=call.call_id, sandbox=await self._sandbox(tool))
        await self._record(call.call_id, await self._invoke(call, tool, args))

    async def _sandbox(self, tool: Tool) -> Sandbox | None:
        """What will confine the commands `tool` runs (None for tools that run none)."""
        if tool.sandbox is None:
            return None
        with anyio.move_on_after(30):  # a first call may probe the sandbox once
            return await tool.sandbox(self.ctx.environment)
        return "none"

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
            output=lambda content: self._output(call.call_id, content),
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
                log.exception("tool %s (call %s) raised", tool.name, call.call_id)
                result = _error_result("tool_exception", f"{tool.name} raised {error!r}")
        if result is None:
            return None
        reviewed = await self.gate.review(call, result)
        repaired, count = scrub_values(reviewed)  # the last line: tools' text enters here
        if count:
            detail = repair_detail(f"the result of {tool.name}", count)
            log.warning("call %s: %s", call.call_id, detail)
            await self.emit(
                ev.HookAction,
                hook=REPAIR_HOOK,
                action=REPAIR_ACTION,
                detail=detail,
                call_id=call.call_id,
            )
        return repaired

    async def _record(self, call_id: str, result: ToolResult | None) -> None:
        if result is None:
            await self.cancel(call_id)
            return
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="failed" if result.error is not None else "completed",
            content=await self.bounded(call_id, result.content),
            raw_output_json=result.raw_output_json,
            error=result.error,
        )

    async def bounded(
        self, call_id: str, content: tuple[ToolContent, ...]
    ) -> tuple[ToolContent, ...]:
        """The result as the model may see it: oversized text cut in the middle, the full
        text kept by the session's spill (`bounding.py`)."""
        ctx = self.ctx
        return await bound_content(
            content,
            ctx.output_limits,
            spill=ctx.spill,
            session_id=ctx.log.session_id,
            call_id=call_id,
        )

    async def fail(self, call_id: str, code: str, message: str) -> None:
        """Log a failed result the model will see: the message is also its content."""
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="failed",
            content=(TextPart(text=message),),
            error=ToolError(code=code, message=message),
        )

    async def cancel(self, call_id: str, message: str = "cancelled before it finished") -> None:
        """Log the synthetic `cancelled` result of a call that never finished."""
        await self.emit(
            ev.ToolFinished,
            call_id=call_id,
            status="cancelled",
            error=ToolError(code="cancelled", message=message),
        )

    async def _output(self, call_id: str, content: tuple[ToolContent, ...]) -> None:
        content, count = scrub_values(content)
        if count:
            log.warning("call %s: %s", call_id, repair_detail("a tool's progress output", count))
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

    async def settle(self) -> None:
        """Answer calls an earlier run left open, before anything new reaches the model:
        the client's results for frontend tools, its approvals (`resume`), and a `cancelled`
        result for anything it did not answer."""
        open_calls = list(self.ctx.facts.open_calls.values())
        if not open_calls:
            return
        results = {r.call_id: r for r in self.turn.tool_results}
        decisions = {d.call_id: d for d in self.turn.resume}
        replies = {r.question_id: r.answer for r in self.turn.answers}
        for call in open_calls:
            if self.ctx.cancel.cancelled:
                break
            question_id = question_id_for(call.call_id)
            if question_id in self.ctx.facts.open_questions and call.call_id not in results:
                reply = replies.get(question_id) or QuestionAnswer(action="cancel")
                asked = self.ctx.facts.open_questions[question_id]
                await answered(
                    self.ctx,
                    self.emit,
                    call.call_id,
                    question_id,
                    reply,
                    schema_json=asked.schema_json,
                    url=asked.url if asked.mode == "url" else None,
                )
            elif call.call_id in results:
                answer = results[call.call_id]
                await self.emit(
                    ev.ToolFinished,
                    call_id=call.call_id,
                    status="failed" if answer.is_error else "completed",
                    content=await self.bounded(call.call_id, answer.content),
                )
            elif call.call_id in decisions and call.name in self.tools:
                args = parse_arguments(call.arguments_json)
                approval = decisions[call.call_id]
                decision = await resolve_resume(self.ctx, self.emit, call, approval, args)
                if decision.action == "run" and args is not None and not self.stopped:
                    await self.execute(call, self.tools[call.name], args)
                elif decision.action == "stop" or self.stopped:
                    await self.stop(call.call_id)
                else:
                    await self.fail(call.call_id, decision.code, decision.message)
            else:
                await self.cancel(
                    call.call_id, "no result was given for this call before the next message"
                )


def _error_result(code: str, message: str) -> ToolResult:
    return ToolResult(
        content=(TextPart(text=message),), error=ToolError(code=code, message=message)
    )
