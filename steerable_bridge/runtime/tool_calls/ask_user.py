"""An `ask_user` call: its question goes to the person, and their answer is the call's result.

The turn's tool batch (`tool_batch.py`) hands `put_question` a valid call when the session can
put questions (`questions.py`'s port). The call gives either a form (`schema`) or a page to
open (`url`); anything else, a url nobody can open, or a form for a client that shows only
pages, comes back as an `invalid_arguments` failure the model sees. A url question is asked
in url mode when the client shows urls, else as a yes/no form with the page in its message.
The question is logged (`question_asked`); a client that cannot answer now gets it as an
interrupt (the call waits for its next run), otherwise the person is asked under the turn's
cancel token and the permission timeout. `answered` logs the answer (`question_answered`,
then `question_completed` for an accepted url question) and the call's result — also for an
answer that arrives in a later run. Like `decision.py`, it returns a `Decision` for what the
batch must do (fail the call, or leave it open), or None once the result is logged.
"""

from __future__ import annotations

from typing import Any

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.questions import (
    CONFIRM_SCHEMA,
    QuestionAnswer,
    QuestionRequest,
    Questions,
    answer_schema,
    answer_text,
    content_problem,
    form_problem,
    question_id_for,
    url_problem,
)
from steerable_bridge.runtime.tool_calls.decision import Decision
from steerable_bridge.runtime.turns.turn import Emit, TurnContext
from steerable_bridge.runtime.values import Interrupt, TextPart, canonical_json

__all__ = ["answered", "put_question"]


async def put_question(
    ctx: TurnContext, emit: Emit, call: ev.ToolCallEnd, args: dict[str, Any]
) -> Decision | None:
    """Put an `ask_user` call's question to the person; its answer is the result."""
    questions = ctx.questions
    assert questions is not None
    message, schema, url = str(args["message"]), args.get("schema"), args.get("url")
    problem = _problem(questions, schema, url)
    if problem is not None:
        return Decision("fail", "invalid_arguments", f"ask_user: {problem}; call it again")
    mode: ev.QuestionMode = "form"
    if url is not None and "url" in questions.modes:
        mode, schema_json = "url", None
    elif url is not None:  # the client shows forms only: a yes/no with the page in it
        message, schema_json, url = f"{message}\n\nOpen {url}", CONFIRM_SCHEMA, None
    else:
        schema_json = canonical_json(schema)
    question_id = question_id_for(call.call_id)
    await emit(
        ev.QuestionAsked,
        question_id=question_id,
        message=message,
        mode=mode,
        schema_json=schema_json,
        url=url,
        call_id=call.call_id,
    )
    if questions.ask is None:
        interrupt = Interrupt(
            id=question_id,
            reason=message,
            tool_call_id=call.call_id,
            response_schema_json=answer_schema(schema_json, url=url is not None),
            url=url,
        )
        return Decision("defer", interrupt=interrupt)
    request = QuestionRequest(
        session_id=ctx.log.session_id,
        question_id=question_id,
        message=message,
        mode=mode,
        schema_json=schema_json,
        url=url,
        call_id=call.call_id,
    )
    answer = None
    with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
        answer = await questions.ask(request)
    late = answer is None and not ctx.cancel.cancelled
    await answered(
        ctx,
        emit,
        call.call_id,
        question_id,
        answer or QuestionAnswer(action="cancel"),
        timed_out=ctx.settings.permission_timeout_s if late else None,
        schema_json=schema_json,
        url=url,
    )
    return None


def _problem(questions: Questions, schema: Any, url: Any) -> str | None:
    """What is wrong with the question the call asks (None: it can be put)."""
    if (schema is None) == (url is None):
        return "give either schema (a form) or url (a page to open)"
    if url is not None:
        return url_problem(url)
    if "form" not in questions.modes:
        return "this client opens pages (url) but shows no forms; ask in your reply"
    return form_problem(schema)


async def answered(
    ctx: TurnContext,
    emit: Emit,
    call_id: str,
    question_id: str,
    answer: QuestionAnswer,
    *,
    timed_out: float | None = None,
    schema_json: str | None = None,
    url: str | None = None,
) -> None:
    """Log the answer to an `ask_user` call's question, then the call's result (none
    when the turn was cancelled meanwhile: the loop closes the call). An accepted url
    question is complete once the person is back: `question_completed` comes first."""
    accepted = answer.action == "accept"
    await emit(
        ev.QuestionAnswered,
        question_id=question_id,
        action=answer.action,
        content_json=answer.content_json if accepted and url is None else None,
        call_id=call_id,
    )
    if url is not None and accepted:
        await emit(ev.QuestionCompleted, question_id=question_id, call_id=call_id)
    if ctx.cancel.cancelled:
        return
    problem = None
    if accepted and url is None:
        problem = content_problem(schema_json, answer.content_json)
    text = answer_text(answer, timed_out=timed_out, problem=problem, url=url)
    await emit(
        ev.ToolFinished,
        call_id=call_id,
        status="completed",
        content=(TextPart(text=text),),
    )
