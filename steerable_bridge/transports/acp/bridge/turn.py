"""One of our turns, run as prompts of the bridged ACP agent and recorded as LoopEvents.

`BridgeTurn.run()` reads top to bottom as the turn, in the order the native loop logs it:

1. `run_started`; a prompt an earlier run left parked on a permission request is settled —
   the run's `resume` decision answers the agent's still-pending request (approve → its
   allow-once option, reject → reject-once, reject-and-stop → the agent's own
   `reject_stop` option when it offers one, else reject-once and `session/cancel`; no
   decision → `cancelled`, with `session/cancel`) and the rest of that prompt streams into
   this run. Open calls with no parked prompt (the server restarted meanwhile) get a
   `cancelled` result.
2. The client's shared state (`state_snapshot`), the user's message (`user_message`, and a
   title on the first one), then `session/prompt` — with any user messages logged since the
   last run in front (the earlier messages of one AG-UI request) — to the agent's session for this
   conversation (`engine.py` opens or reopens it) and every update it sends, mapped by
   `mapping.py` and recorded through the turn's `TurnRecorder` (log, facts, sink, commits).
3. A permission request: the session's policy decides — allow / deny answer the agent at
   once, `ask` asks (bounded) and records `permission_requested` / `permission_resolved`,
   `defer` records `permission_requested` and ends the run `interrupted` with an approval
   interrupt, parking the prompt. A question (`elicitation/create`) is logged as
   `question_asked` and, the same way, asked at once through the session's questioner or
   deferred as an interrupt carrying its schema or its url (`question-<id>`, parked),
   answered by the next run's `answers` (none → cancel, and `session/cancel`);
   `question_answered` and the agent's reply follow, and the agent's `elicitation/complete`
   for a url question is `question_completed`. Cancel → `session/cancel`, and the rest of
   the prompt is recorded for at most `cancel_grace_s`. Steering goes to the agent mid-turn when it
   takes it (ours: `_steerable/steer`); otherwise, and follow-ups, it becomes the next
   prompt of the same run when the prompt ends. The run ends with one
   `run_finished` (the agent's stop reason, the usage it reported) or `run_failed` (the
   agent exited — `acp_agent_exited` — or answered with an error, or could not start).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from acp import RequestError

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.ports.permissions import PermissionRequest
from steerable_bridge.runtime.ports.questions import (
    ANSWER_PREFIX,
    QuestionAnswer,
    QuestionRequest,
    answer_schema,
    question_id_for,
)
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.tool_calls.decision import APPROVAL_SCHEMA, STOP_OPTION
from steerable_bridge.runtime.turns.recorder import TurnRecorder
from steerable_bridge.runtime.turns.steering import Queued
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import (
    ContentPart,
    Interrupt,
    PermissionOption,
    TextPart,
    ToolCall,
    ToolError,
    canonical_json,
)
from steerable_bridge.transports.acp.bridge.child import AgentUnavailable, Live
from steerable_bridge.transports.acp.bridge.client import (
    Asked,
    Completed,
    PromptDone,
    PromptFailed,
    Questioned,
)
from steerable_bridge.transports.acp.bridge.engine import (
    SESSION_OPTION,
    AcpBridge,
    Parked,
    Prompt,
)
from steerable_bridge.transports.acp.bridge.mapping import (
    Emission,
    UpdateMapper,
    run_stop_reason,
    run_usage,
    session_level,
)
from steerable_bridge.transports.acp.renderer import content_block

__all__ = ["BridgeTurn"]

log = logging.getLogger("steerable_bridge.acp.bridge")

STEER_POLL_S = 0.1
"""How often a prompt with nothing arriving looks at the steering queue."""


@dataclass(frozen=True, slots=True)
class _Failed:
    code: str
    message: str


_End = StopReason | _Failed
"""How streaming a prompt ended: a stop reason (`interrupted` when parked) or a failure."""

_AGAIN = object()
"""Nothing arrived from the prompt in one poll: look at the steering queue again."""


class BridgeTurn:
    """One turn of a bridged conversation (see the module docstring)."""

    def __init__(self, bridge: AcpBridge, ctx: TurnContext, turn: TurnInput) -> None:
        self.bridge = bridge
        self.ctx = ctx
        self.turn = turn
        self.rec = TurnRecorder(ctx, turn)
        self.session_id = ctx.log.session_id
        self.interrupts: list[Interrupt] = []
        self.stopped = False
        self.mapper: UpdateMapper | None = None
        self.unforwarded: list[Queued] = []
        """Steering the agent could not take mid-turn: sent as the next prompt."""

    async def emit(self, cls: type[ev.EventBase], /, **fields: Any) -> ev.EventBase:
        return await self.rec.emit(cls, **fields)

    async def emit_all(self, emissions: list[Emission]) -> None:
        for cls, fields in emissions:
            if cls is ev.Compaction and "through_seq" not in fields:
                fields = {**fields, "through_seq": self._before_compaction(fields)}
            await self.rec.emit(cls, **fields)

    def _before_compaction(self, fields: dict[str, Any]) -> int:
        """A bridged agent's compaction summarizes what came before it started: the seq of
        the last event logged before its `compaction_started`."""
        view = self.ctx.log.view()
        for index in range(len(view) - 1, -1, -1):
            event = view[index]
            if (
                isinstance(event, ev.CompactionStarted)
                and event.compaction_id == fields["compaction_id"]
            ):
                return event.seq - 1
        return view[-1].seq if len(view) else -1

    async def run(self) -> RunOutcome:
        ctx, turn = self.ctx, self.turn
        earlier = self.unsent()
        try:
            await self.emit(
                ev.RunStarted, model=ctx.model, trace_id=ctx.trace_id, **turn.run_started_fields()
            )
            ended = await self._pick_up()
            if ended is not None:
                return ended
            if turn.state_json is not None:
                await self.emit(ev.StateSnapshot, state_json=turn.state_json)
            if not turn.content:
                return await self.end("end_turn")
            await self.emit(
                ev.UserMessage,
                message_id=turn.message_id or self.rec.new_id("user"),
                content=turn.content,
            )
            if ctx.facts.title is None:
                await self.emit(ev.SessionInfo, title=_title(turn.content))
            return await self._prompts(earlier + turn.content)
        except AgentUnavailable as error:
            return await self.fail(error.code, error.message)
        except RequestError as error:
            return await self.fail("acp_agent_error", f"the ACP agent refused: {error}")
        except StoreError as error:
            log.warning("run %s: the session store failed: %s", self.rec.run_id, error.message)
            return await self.fail(error.code, error.message)
        except Exception as error:
            log.exception("bridged run %s failed with an unexpected error", self.rec.run_id)
            return await self.fail("internal_error", f"{type(error).__name__}: {error}")

    async def _pick_up(self) -> RunOutcome | None:
        """Settle the request a previous run parked on (or drop the calls a restart left
        open); the run's outcome when that ends it, None when the turn goes on."""
        ctx, turn = self.ctx, self.turn
        parked = self.bridge.parked.pop(self.session_id, None)
        if parked is not None:
            if parked.question is not None:
                withdrawn = all(a.question_id != parked.question_id for a in turn.answers)
                end = await self.settle_question(parked, parked.question)
            else:
                withdrawn = all(d.call_id != parked.call_id for d in turn.resume)
                end = await self.settle(parked)
            if self.stopped or ctx.cancel.cancelled or end not in ("end_turn", "cancelled"):
                return await self.end(end)
            if end == "cancelled" and not withdrawn:
                return await self.end(end)  # a new message goes on after a withdrawn ask
        elif ctx.facts.open_calls or ctx.facts.open_questions:
            await self.drop_open_calls()
            if (turn.resume or turn.answers) and not turn.content:
                return await self.fail(
                    "acp_agent_request_lost",
                    "the ACP agent's permission request is gone (the server or the agent"
                    " restarted while it waited); send your message again",
                )
        return None

    async def _prompts(self, content: tuple[ContentPart, ...]) -> RunOutcome:
        """Prompt the agent with `content`, then with the steering or follow-ups queued by
        the time each prompt ends, until one ends otherwise or nothing is queued."""
        ctx = self.ctx
        while True:
            end = await self.stream(await self.start(content))
            if end != "end_turn" or self.stopped:
                return await self.end(end)
            steering, self.unforwarded = self.unforwarded + ctx.steering.take(), []
            follow_ups = ctx.follow_ups.take() if not steering else []
            if not steering and not follow_ups:
                return await self.end(end)
            cls = ev.SteerApplied if steering else ev.FollowUpApplied
            parts: list[ContentPart] = []
            for queued, message_id in steering or follow_ups:
                await self.emit(
                    cls, message_id=message_id or self.rec.new_id("steer"), content=queued
                )
                parts.extend(queued)
            content = tuple(parts)

    def unsent(self) -> tuple[ContentPart, ...]:
        """User messages logged since the last run, outside any (the earlier messages of
        one AG-UI request): the agent has not seen them, so they open the next prompt."""
        view = self.ctx.log.view()
        parts: list[ContentPart] = []
        index = len(view) - 1
        while index >= 0 and view[index].run_id == "":
            event = view[index]
            if isinstance(event, ev.UserMessage):
                parts[:0] = event.content
            index -= 1
        return tuple(parts)

    # -- the child's session and prompt -----------------------------------------------------

    async def child_session(self, live: Live) -> str:
        ctx = self.ctx
        return await self.bridge.session_for(
            live, self.session_id, ctx.cwd, ctx.facts.config.get(SESSION_OPTION), self.emit
        )

    async def start(self, content: tuple[ContentPart, ...]) -> Prompt:
        live = await self.bridge.child.ready()
        child = self.bridge.client.session(await self.child_session(live))
        facts = self.ctx.facts
        for update in child.take_between():  # what it said about the session since
            for cls, fields in session_level(update) or []:
                if cls is ev.ModeChanged and fields["mode_id"] == facts.mode_id:
                    continue  # nothing new: logged already (a mode a client switched to)
                if (
                    cls is ev.ConfigChanged
                    and facts.config.get(fields["option_id"]) == fields["value"]
                ):
                    continue
                await self.emit(cls, **fields)
        self.mapper = UpdateMapper(new_id=self.rec.new_id)
        blocks: list[object] = [content_block(part) for part in content]
        return self.bridge.start(live, child, blocks, self.mapper)

    async def stream(self, prompt: Prompt) -> _End:
        """Record the prompt's updates until it ends, fails, or parks on a permission."""
        ctx = self.ctx
        cancelled = False
        grace_end = 0.0
        while True:
            item = None
            if len(ctx.steering) and not cancelled:
                await self.forward_steering(prompt)
            if not ctx.cancel.cancelled:
                item = await self._receive(prompt)
                if item is _AGAIN:
                    continue  # nothing yet: look at the steering queue again
            if item is None:
                if not cancelled:
                    cancelled = True
                    grace_end = anyio.current_time() + self.bridge.cancel_grace_s
                    await self.bridge.cancel_child(prompt.live, prompt.child.session_id)
                item = await self._within_grace(prompt, grace_end)
                if item is None:
                    return "cancelled"
            end = await self._take(prompt, item, cancelled=cancelled)
            if end is not None:
                return end

    async def _receive(self, prompt: Prompt) -> object:
        """The prompt's next item; `_AGAIN` when none came within `STEER_POLL_S`, None when
        the turn was cancelled while waiting."""
        ctx = self.ctx
        try:  # what already arrived is taken without a trip through the event loop
            return prompt.receive.receive_nowait()
        except anyio.WouldBlock:
            item = None
            with ctx.cancel.scope(), anyio.move_on_after(STEER_POLL_S):
                item = await self._next(prompt)
            if item is None and not ctx.cancel.cancelled:
                return _AGAIN
            return item
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return await self._next(prompt)

    async def _within_grace(self, prompt: Prompt, grace_end: float) -> object:
        """The cancelled prompt's next item by `grace_end`; None (the prompt let go, its
        open blocks closed) when the agent did not end it in time."""
        item = None
        with anyio.move_on_after(max(0.0, grace_end - anyio.current_time())):
            item = await self._next(prompt)
        if item is None:  # the agent did not end its prompt in time: let it go
            log.warning("the ACP agent did not end a cancelled prompt in time")
            prompt.child.close_prompt()
            await self.emit_all(prompt.mapper.close("cancelled"))
        return item

    async def _take(self, prompt: Prompt, item: object, *, cancelled: bool) -> _End | None:
        """Record one item of the prompt; how the prompt ended when the item ends it."""
        if isinstance(item, PromptDone):
            prompt.child.close_prompt()
            self.rec.usage = self.rec.usage + run_usage(item.response.usage)
            stop = "cancelled" if cancelled else run_stop_reason(item.response.stop_reason)
            await self.emit_all(prompt.mapper.close("cancelled" if cancelled else "end"))
            return stop
        if isinstance(item, PromptFailed):
            prompt.child.close_prompt()
            await self.emit_all(prompt.mapper.close("failed"))
            return _Failed(item.code, item.message)
        if isinstance(item, Asked):
            if cancelled:
                item.reply(None)
                return None
            return "interrupted" if await self.permission(prompt, item) else None
        if isinstance(item, Questioned):
            if cancelled:
                item.reply(None)
                return None
            return "interrupted" if await self.question(prompt, item) else None
        if isinstance(item, Completed):
            await self.completed(prompt, item)
            return None
        await self.emit_all(prompt.mapper.update(item))
        return None

    async def forward_steering(self, prompt: Prompt) -> None:
        """Hand queued steering to an agent that takes it mid-turn (ours: `_steerable/steer`,
        as its `initialize` advertises), logged as `steer_applied`; the rest waits to be
        sent as the next prompt."""
        queued = self.ctx.steering.take()
        caps = prompt.live.init.agent_capabilities
        own = (caps.field_meta or {}).get("steerable") if caps is not None else None
        for content, message_id in queued:
            text = "".join(p.text for p in content if isinstance(p, TextPart))
            taken = False
            if (
                isinstance(own, dict)
                and "steer" in own
                and all(isinstance(p, TextPart) for p in content)
            ):
                try:
                    with anyio.fail_after(10):
                        reply = await prompt.live.conn.ext_method(
                            "steerable/steer",
                            {"sessionId": prompt.child.session_id, "text": text},
                        )
                    taken = reply.get("taken") is True
                except Exception as error:
                    log.info("the ACP agent did not take a steer: %s", error)
            if taken:
                message_id = message_id or self.rec.new_id("steer")
                await self.emit(ev.SteerApplied, message_id=message_id, content=content)
            else:
                self.unforwarded.append(Queued(content, message_id))

    async def _next(self, prompt: Prompt) -> object:
        try:
            return await prompt.receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return PromptFailed(
                "acp_agent_exited", "the ACP agent's prompt ended without an answer"
            )

    # -- permissions ------------------------------------------------------------------------

    async def permission(self, prompt: Prompt, asked: Asked) -> bool:
        """Decide the agent's permission request; True when it was deferred (parked)."""
        ctx = self.ctx
        emissions, name, title = prompt.mapper.permission(asked.tool_call)
        await self.emit_all(emissions)
        call_id = asked.tool_call.tool_call_id
        call = prompt.mapper.calls[call_id]
        options = tuple(
            PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind) for o in asked.options
        )
        request = PermissionRequest(
            session_id=self.session_id,
            call=ToolCall(call_id=call_id, name=name, arguments_json=call.arguments_json),
            tool_kind=call.kind,
            title=title,
            options=options,
        )
        verdict, reason = ctx.policy.verdict(request)
        if verdict in ("allow", "deny"):
            asked.reply(_pick(options, allow=verdict == "allow"))
            if verdict == "deny":
                log.info("bridged call %s denied by policy: %s", call_id, reason)
            return False
        await self.emit(ev.PermissionRequested, call_id=call_id, tool_name=name, options=options)
        if verdict == "defer":
            # A run must not end inside a message (fast-agent streams an empty text chunk
            # after its tool call): close them; what follows the answer starts new ones.
            await self.emit_all(prompt.mapper.pause())
            self.interrupts.append(
                Interrupt(
                    id=f"approval-{call_id}",
                    reason=f"Approve {title}?",
                    tool_call_id=call_id,
                    response_schema_json=APPROVAL_SCHEMA,
                )
            )
            self.bridge.parked[self.session_id] = Parked(
                prompt=prompt, asked=asked, call_id=call_id, tool_name=name
            )
            return True
        answer = None
        with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
            answer = await ctx.policy.ask(request)
        outcome = answer.outcome if answer is not None else "cancelled"
        await self.emit(
            ev.PermissionResolved,
            call_id=call_id,
            tool_name=name,
            outcome=outcome,
            option_id=answer.option_id if answer is not None else None,
        )
        asked.reply(answer.option_id if answer is not None and outcome != "cancelled" else None)
        return False

    # -- questions --------------------------------------------------------------------------

    async def question(self, prompt: Prompt, asked: Questioned) -> bool:
        """Put the agent's question to the person; True when it was deferred (parked)."""
        ctx = self.ctx
        mode = asked.mode
        call_id = getattr(mode, "tool_call_id", None)
        schema = getattr(mode, "requested_schema", None)
        url = getattr(mode, "url", None)
        schema_json = (
            canonical_json(schema.model_dump(mode="json", by_alias=True, exclude_none=True))
            if schema is not None
            else None
        )
        question_id = ANSWER_PREFIX + self.rec.new_id("elicitation")
        if call_id is not None and question_id_for(call_id) not in ctx.facts.open_questions:
            question_id = question_id_for(call_id)  # as our own ask_user calls name theirs
        elicitation_id = getattr(mode, "elicitation_id", None)
        if url is not None and isinstance(elicitation_id, str):
            prompt.child.remember_url(elicitation_id, question_id, call_id)
        await self.emit(
            ev.QuestionAsked,
            question_id=question_id,
            message=asked.message,
            mode="url" if url is not None else "form",
            schema_json=schema_json,
            url=str(url) if url is not None else None,
            call_id=call_id,
        )
        questions = ctx.questions
        answer: QuestionAnswer | None = None
        if questions is not None and questions.ask is None:
            self.interrupts.append(
                Interrupt(
                    id=question_id,
                    reason=asked.message,
                    tool_call_id=call_id,
                    response_schema_json=answer_schema(schema_json, url=url is not None),
                    url=str(url) if url is not None else None,
                )
            )
            self.bridge.parked[self.session_id] = Parked(
                prompt=prompt, asked=None, call_id=call_id or "", tool_name="",
                question=asked, question_id=question_id,
            )  # fmt: skip
            return True
        if questions is not None and questions.ask is not None:
            request = QuestionRequest(
                session_id=self.session_id,
                question_id=question_id,
                message=asked.message,
                mode="url" if url is not None else "form",
                schema_json=schema_json,
                url=str(url) if url is not None else None,
                call_id=call_id,
            )
            with ctx.cancel.scope(), anyio.move_on_after(ctx.settings.permission_timeout_s):
                answer = await questions.ask(request)
        await self.answered(asked, question_id, call_id, answer)
        return False

    async def completed(self, prompt: Prompt, done: Completed) -> None:
        """The agent's url question is over: `question_completed` (once, for a known id)."""
        known = prompt.child.url_questions.pop(done.elicitation_id, None)
        if known is None:
            log.info("the agent completed url elicitation %s, never asked", done.elicitation_id)
            return
        question_id, call_id = known
        await self.emit(ev.QuestionCompleted, question_id=question_id, call_id=call_id)

    async def answered(
        self,
        asked: Questioned,
        question_id: str,
        call_id: str | None,
        answer: QuestionAnswer | None,
    ) -> None:
        """Log the answer (None: cancel) and give it to the agent."""
        answer = answer or QuestionAnswer(action="cancel")
        await self.emit(
            ev.QuestionAnswered,
            question_id=question_id,
            action=answer.action,
            content_json=answer.content_json if answer.action == "accept" else None,
            call_id=call_id,
        )
        asked.reply(answer)

    async def settle_question(self, parked: Parked, asked: Questioned) -> _End:
        """Answer the parked prompt's question with this run's answer; stream the rest."""
        prompt = parked.prompt
        self.mapper = prompt.mapper
        reply = next(
            (a.answer for a in self.turn.answers if a.question_id == parked.question_id), None
        )
        late = asked.answered.is_set()  # the agent stopped waiting (the client's bound)
        if reply is None and not late:
            await self.bridge.cancel_child(prompt.live, prompt.child.session_id)
        call_id = parked.call_id or None
        await self.answered(asked, parked.question_id, call_id, None if late else reply)
        return await self.stream(prompt)

    async def settle(self, parked: Parked) -> _End:
        """Answer the parked prompt's request with this run's decision; stream the rest."""
        prompt, asked = parked.prompt, parked.asked
        assert asked is not None
        self.mapper = prompt.mapper
        decision = next((d for d in self.turn.resume if d.call_id == parked.call_id), None)
        options = tuple(
            PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind) for o in asked.options
        )
        late = asked.answered.is_set()  # the agent stopped waiting (the client's bound)
        if decision is None or late:
            if not late:
                await self.bridge.cancel_child(prompt.live, prompt.child.session_id)
                asked.reply(None)
            await self.emit(
                ev.PermissionResolved, call_id=parked.call_id, tool_name=parked.tool_name,
                outcome="cancelled",
            )  # fmt: skip
        else:
            stop = not decision.approved and decision.stop
            choice = _pick(options, allow=decision.approved, always=decision.always and not stop)
            if stop:
                own = next((o.option_id for o in options if o.option_id == STOP_OPTION), None)
                choice = own or choice
                self.stopped = True
            await self.emit(
                ev.PermissionResolved,
                call_id=parked.call_id,
                tool_name=parked.tool_name,
                outcome=_outcome(options, choice, allow=decision.approved),
                option_id=choice,
            )
            asked.reply(choice)
            if stop and choice != STOP_OPTION:
                await self.bridge.cancel_child(prompt.live, prompt.child.session_id)
        end = await self.stream(prompt)
        return "rejected" if self.stopped and not isinstance(end, _Failed) else end

    async def drop_open_calls(self) -> None:
        for question_id, asked in list(self.ctx.facts.open_questions.items()):
            await self.emit(
                ev.QuestionAnswered,
                question_id=question_id,
                action="cancel",
                call_id=asked.call_id,
            )
        for call_id in list(self.ctx.facts.open_calls):
            await self.emit(
                ev.ToolFinished,
                call_id=call_id,
                status="cancelled",
                error=ToolError(
                    code="cancelled",
                    message="the ACP agent's request for this call is gone (it or the server"
                    " restarted), so the call did not run",
                ),
            )

    # -- ending -----------------------------------------------------------------------------

    async def _close_open(self, why: Literal["end", "cancelled", "failed"]) -> None:
        waiting = {i.tool_call_id for i in self.interrupts}
        parked = self.bridge.parked.get(self.session_id)
        if parked is not None and parked.prompt.mapper is self.mapper:
            # the prompt goes on in the agent: its calls finish in the run that resumes it
            waiting |= {c.call_id for c in parked.prompt.mapper.calls.values() if not c.finished}
        elif self.mapper is not None:
            await self.emit_all(self.mapper.close(why))
        for call_id in list(self.ctx.facts.open_calls):
            if call_id not in waiting:
                await self.emit(
                    ev.ToolFinished,
                    call_id=call_id,
                    status="cancelled",
                    error=ToolError(code="cancelled", message="cancelled before it finished"),
                )

    async def end(self, end: _End) -> RunOutcome:
        if isinstance(end, _Failed):
            return await self.fail(end.code, end.message)
        interrupted = end == "interrupted"
        with anyio.CancelScope(shield=True):
            await self._close_open("cancelled" if end == "cancelled" else "end")
            final = await self.emit(
                ev.RunFinished,
                stop_reason=end,
                usage=self.rec.usage,
                interrupts=tuple(self.interrupts) if interrupted else (),
            )
        return RunOutcome(
            run_id=self.rec.run_id,
            stop_reason=end,
            usage=self.rec.usage,
            final_event=final,  # type: ignore[arg-type]
        )

    async def fail(self, code: str, message: str) -> RunOutcome:
        with anyio.CancelScope(shield=True):
            self.bridge.parked.pop(self.session_id, None)
            self.interrupts.clear()
            final = None
            if not self.rec.ended:
                await self._close_open("failed")
                final = await self.emit(ev.RunFailed, code=code, message=message)
        return RunOutcome(
            run_id=self.rec.run_id,
            stop_reason=None,
            usage=self.rec.usage,
            error_code=code,
            error_message=message,
            final_event=final,  # type: ignore[arg-type]
        )


def _pick(
    options: tuple[PermissionOption, ...], *, allow: bool, always: bool = False
) -> str | None:
    """The agent's option for a plain allow (once, else always) or reject (once, else
    always) — the "always" one first when the client answered `always`; None (answered
    `cancelled`) when it offers no such option."""
    kinds = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
    if always:
        kinds = (kinds[1], kinds[0])
    for kind in kinds:
        for option in options:
            if option.kind == kind and option.option_id != STOP_OPTION:
                return option.option_id
    return None


def _outcome(
    options: tuple[PermissionOption, ...], choice: str | None, *, allow: bool
) -> Literal["allow_once", "allow_always", "reject_once", "reject_always"]:
    """The logged outcome of answering with option `choice`: its kind, when "always"."""
    kind = next((o.kind for o in options if o.option_id == choice), None)
    if kind == "allow_always" and allow:
        return "allow_always"
    if kind == "reject_always" and not allow:
        return "reject_always"
    return "allow_once" if allow else "reject_once"


def _title(content: tuple[ContentPart, ...]) -> str:
    text = " ".join(" ".join(p.text for p in content if isinstance(p, TextPart)).split())
    if not text:
        return "New session"
    return text if len(text) <= 60 else text[:57] + "..."
