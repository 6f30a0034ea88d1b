"""An AG-UI interrupt answered by the person at the editor, as the runtime asks about tools.

A server that needs approval ends its run with `outcome: interrupt` and the interrupts
(`id`, `reason`, `message`, `toolCallId`, `responseSchema`); the answer goes back as
`resume[]` on the next run. `answer_interrupts(...)` asks about each one through the turn's
permission policy — in an editor, the ACP transport's asker, i.e. `session/request_permission`
— with the runtime's rules: an "always" answer remembered for the call (the session's, then
the project's) is used without asking; the mode may allow or deny at once; otherwise
`permission_requested`, the question (bounded by the permission timeout and the turn's
cancel token), `permission_resolved`, and an "always" kept for next time. An interrupt that
names no tool call is shown as a call of its own (`agui_interrupt`, titled with its
message) so the editor has something to approve, finished with the answer. The resume
payload follows the interrupt's schema: `{"approved": bool}` (plus `"stop": true` for
"Reject and stop" when the schema has it, as ours does), or the schema's first boolean
property; a withdrawn question answers `status: "cancelled"`.

An interrupt that asks for information rather than approval — its `responseSchema` is ours
(`{action, content: <form>}`, what `serve` sends for the model's `ask_user`) or itself a
flat form with a field that is not a yes/no — is a question when the editor can answer one
(the ACP client advertised form elicitation): `question_asked`, the ACP transport's
`elicitation/create` with that form (bounded likewise), `question_answered`, and the resume
entry `{action, content}` for our schema, or the submitted content itself for a plain form
(decline / cancel → `status: "cancelled"`). An editor that cannot answer forms gets the
approval question as before (for our schema: allow → `{"action": "accept"}` without
content, reject → `{"action": "decline"}`).

An interrupt whose `metadata` is `{"mode": "url", "url": <http(s) page>}` (what `serve`
sends for an `ask_user` with a url) is a url question: to an editor that advertised url
elicitation it is `elicitation/create` in url mode, to one with forms only a yes/no form
with the page in its message, and otherwise the approval question naming the page; the
resume entry is `{"action": ...}`. An accepted one is remembered by the mapper until the
server completes it (CUSTOM `steerable.question_completed`) or its resumed run ends without
asking it again — then `question_completed`, i.e. the editor's `elicitation/complete`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from ag_ui.core import Interrupt, ResumeEntry

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
from steerable_bridge.runtime.ports.questions import (
    CONFIRM_SCHEMA,
    QuestionAnswer,
    Questioner,
    QuestionRequest,
    form_problem,
    url_problem,
)
from steerable_bridge.runtime.tool_calls.approvals import approval_key, approval_options
from steerable_bridge.runtime.tool_calls.decision import STOP_OPTION
from steerable_bridge.runtime.turns.turn import Emit, TurnContext
from steerable_bridge.runtime.values import TextPart, ToolCall, canonical_json
from steerable_bridge.transports.agui.bridge.calls import BridgedCall, raw_arguments
from steerable_bridge.transports.agui.bridge.mapping import EventMapper

__all__ = ["Answers", "answer_interrupts"]

log = logging.getLogger(__name__)

INTERRUPT_TOOL = "agui_interrupt"
"""The name an interrupt without a tool call is shown under."""


@dataclass(frozen=True, slots=True)
class Answers:
    """The resume entries for the next run, and whether the person stopped the turn."""

    resume: tuple[ResumeEntry, ...]
    stop: bool = False


def _payload(schema: Mapping[str, Any] | None, approved: bool, stop: bool) -> dict[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    properties = properties if isinstance(properties, Mapping) else {}
    action = properties.get("action")
    if isinstance(action, Mapping) and "accept" in (action.get("enum") or ()):
        return {"action": "accept" if approved else "decline"}  # our question, asked as yes/no
    if "approved" in properties or not properties:
        payload: dict[str, Any] = {"approved": approved}
        if stop and "stop" in properties:
            payload["stop"] = True
        return payload
    for name, spec in properties.items():
        if isinstance(spec, Mapping) and spec.get("type") == "boolean":
            return {name: approved}
    return {"approved": approved}


async def _shown_call(mapper: EventMapper, emit: Emit, item: Interrupt) -> BridgedCall:
    """A call standing for an interrupt that names none, so the editor can show it."""
    call_id = mapper.claim(f"interrupt-{item.id}")
    call = mapper.calls[call_id] = BridgedCall(call_id=call_id, name=INTERRUPT_TOOL)
    title = item.message or item.reason
    await emit(
        ev.ToolCallStart,
        call_id=call_id,
        name=INTERRUPT_TOOL,
        parent_message_id=mapper.claim(f"msg-{call_id}"),
    )
    call.ended = await emit(
        ev.ToolCallEnd,
        call_id=call_id,
        name=INTERRUPT_TOOL,
        arguments_json=json.dumps({"reason": item.reason, "message": item.message}),
        title=title,
    )
    return call


async def _ask(ctx: TurnContext, emit: Emit, call: BridgedCall, title: str) -> PermissionAnswer:
    """The person's answer about `call` (or the remembered / the mode's one)."""
    args = raw_arguments(call)
    key = approval_key(call.name, args)
    remembered = None if key is None else ctx.facts.always.get(key)
    if remembered is None and key is not None and ctx.approvals is not None:
        with anyio.move_on_after(10):
            remembered = await ctx.approvals.recall(ctx.cwd, key)
    if remembered is not None:
        return PermissionAnswer(outcome="allow_once" if remembered else "reject_once")
    assert call.ended is not None
    request = PermissionRequest(
        session_id=ctx.log.session_id,
        call=ToolCall(
            call_id=call.call_id, name=call.name, arguments_json=call.ended.arguments_json
        ),
        tool_kind=call.ended.tool_kind,
        title=title,
        options=approval_options(call.name, key),
    )
    verdict, reason = ctx.policy.verdict(request)
    if verdict == "allow":
        return PermissionAnswer(outcome="allow_once")
    if verdict in ("deny", "defer"):
        log.info("interrupt for %s refused without asking: %s", call.call_id, reason or verdict)
        return PermissionAnswer(outcome="reject_once")
    await emit(
        ev.PermissionRequested, call_id=call.call_id, tool_name=call.name, options=request.options
    )
    answer: PermissionAnswer | None = None
    with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
        answer = await ctx.policy.ask(request)
    if answer is None:
        answer = PermissionAnswer(outcome="cancelled")
    outcome = answer.outcome
    if key is None and outcome in ("allow_always", "reject_always"):
        outcome = "allow_once" if outcome == "allow_always" else "reject_once"
    await emit(
        ev.PermissionResolved,
        call_id=call.call_id,
        tool_name=call.name,
        outcome=outcome,
        option_id=answer.option_id,
        approval_key=key,
    )
    if outcome in ("allow_always", "reject_always") and key is not None and ctx.approvals:
        try:
            with anyio.fail_after(10):
                await ctx.approvals.remember(ctx.cwd, key, outcome == "allow_always")
        except Exception:
            log.warning("could not keep the project's approval for %s", key, exc_info=True)
    return PermissionAnswer(outcome=outcome, option_id=answer.option_id)


def _question_form(schema: object) -> tuple[Mapping[str, Any], bool] | None:
    """(the form, whether the schema is ours `{action, content}`) when the interrupt asks
    for information; None when it asks for approval."""
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    action, content = properties.get("action"), properties.get("content")
    if (
        isinstance(action, Mapping)
        and "accept" in (action.get("enum") or ())
        and isinstance(content, Mapping)
        and form_problem(content) is None
    ):
        return content, True
    if "approved" in properties or form_problem(schema) is not None:
        return None
    kinds = {f.get("type") for f in properties.values() if isinstance(f, Mapping)}
    return (schema, False) if kinds - {"boolean"} else None


async def _question(
    ctx: TurnContext,
    emit: Emit,
    ask: Questioner,
    item: Interrupt,
    call_id: str | None,
    form: Mapping[str, Any],
    ours: bool,
) -> ResumeEntry:
    """Ask the interrupt as a question; the resume entry that answers it."""
    schema_json = canonical_json(dict(form))
    message = item.message or item.reason or "The agent needs your input"
    await emit(
        ev.QuestionAsked,
        question_id=item.id,
        message=message,
        schema_json=schema_json,
        call_id=call_id,
    )
    request = QuestionRequest(
        session_id=ctx.log.session_id,
        question_id=item.id,
        message=message,
        schema_json=schema_json,
        call_id=call_id,
    )
    answer: QuestionAnswer | None = None
    if not ctx.cancel.cancelled:
        with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
            answer = await ask(request)
    answer = answer or QuestionAnswer(action="cancel")
    content = json.loads(answer.content_json) if answer.content_json else {}
    await emit(
        ev.QuestionAnswered,
        question_id=item.id,
        action=answer.action,
        content_json=answer.content_json if answer.action == "accept" else None,
        call_id=call_id,
    )
    if ours:
        payload: dict[str, Any] = {"action": answer.action}
        if answer.action == "accept":
            payload["content"] = content
        return ResumeEntry(interrupt_id=item.id, status="resolved", payload=payload)
    if answer.action == "accept":
        return ResumeEntry(interrupt_id=item.id, status="resolved", payload=content)
    return ResumeEntry(interrupt_id=item.id, status="cancelled")


def _page(item: Interrupt) -> str | None:
    """The page a url question's interrupt asks the person to open (None: not one)."""
    meta = item.metadata
    if not isinstance(meta, Mapping) or meta.get("mode") != "url":
        return None
    url = meta.get("url")
    return url if isinstance(url, str) and url_problem(url) is None else None


async def _url_question(
    ctx: TurnContext,
    emit: Emit,
    ask: Questioner,
    item: Interrupt,
    call_id: str | None,
    url: str,
) -> tuple[ResumeEntry, bool]:
    """Ask the interrupt as a url question (a yes/no form to an editor without url mode);
    the resume entry, and whether the editor now waits for its completion (accepted in url
    mode)."""
    modes = ctx.questions.modes if ctx.questions is not None else frozenset()
    message = item.message or item.reason or "The agent asks you to open a page"
    mode: ev.QuestionMode = "url" if "url" in modes else "form"
    schema_json = None if mode == "url" else CONFIRM_SCHEMA
    if mode == "form":
        message = f"{message}\n\nOpen {url}"
    page = url if mode == "url" else None
    await emit(
        ev.QuestionAsked, question_id=item.id, message=message, mode=mode,
        schema_json=schema_json, url=page, call_id=call_id,
    )  # fmt: skip
    request = QuestionRequest(
        session_id=ctx.log.session_id, question_id=item.id, message=message, mode=mode,
        schema_json=schema_json, url=page, call_id=call_id,
    )  # fmt: skip
    answer: QuestionAnswer | None = None
    if not ctx.cancel.cancelled:
        with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
            answer = await ask(request)
    answer = answer or QuestionAnswer(action="cancel")
    await emit(
        ev.QuestionAnswered,
        question_id=item.id,
        action=answer.action,
        content_json=answer.content_json if answer.action == "accept" and page is None else None,
        call_id=call_id,
    )
    payload = {"action": answer.action}
    entry = ResumeEntry(interrupt_id=item.id, status="resolved", payload=payload)
    return entry, answer.action == "accept" and page is not None


async def answer_interrupts(
    ctx: TurnContext, emit: Emit, mapper: EventMapper, interrupts: tuple[Interrupt, ...]
) -> Answers:
    """Ask about each interrupt in order; the resume entries that answer them."""
    entries: list[ResumeEntry] = []
    stop = False
    for item in interrupts:
        call = mapper.call(item.tool_call_id)
        form = _question_form(item.response_schema)
        ask = ctx.questions.ask if ctx.questions is not None else None
        page = _page(item)
        if page is not None and ask is not None and not stop:
            known = call.call_id if call is not None and call.ended is not None else None
            entry, accepted = await _url_question(ctx, emit, ask, item, known, page)
            entries.append(entry)
            if accepted:
                mapper.opened[item.id] = known
            continue
        if form is not None and ask is not None and not stop:
            known = call.call_id if call is not None and call.ended is not None else None
            entries.append(await _question(ctx, emit, ask, item, known, *form))
            continue
        shown = call is None or call.ended is None
        if shown:
            call = await _shown_call(mapper, emit, item)
        assert call is not None and call.ended is not None
        if stop or ctx.cancel.cancelled:
            answer = PermissionAnswer(outcome="cancelled")
        else:
            title = item.message or call.ended.title or item.reason
            answer = await _ask(ctx, emit, call, f"{title} (open {page})" if page else title)
        approved = answer.outcome in ("allow_once", "allow_always")
        stop = stop or answer.option_id == STOP_OPTION
        if answer.outcome == "cancelled":
            entries.append(ResumeEntry(interrupt_id=item.id, status="cancelled"))
        else:
            payload = _payload(item.response_schema, approved, answer.option_id == STOP_OPTION)
            entries.append(ResumeEntry(interrupt_id=item.id, status="resolved", payload=payload))
        if shown:
            call.finished = True
            text = "approved" if approved else "declined"
            await emit(ev.ToolStarted, call_id=call.call_id)
            await emit(
                ev.ToolFinished,
                call_id=call.call_id,
                status="completed" if approved else "failed",
                content=(TextPart(text=text),),
            )
    return Answers(resume=tuple(entries), stop=stop)
