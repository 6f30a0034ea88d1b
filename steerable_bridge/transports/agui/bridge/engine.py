"""The bridge's turn engine: one turn of ours = one AG-UI run (or a few) on the far server.

`AguiEngine(endpoint)` is a `TurnEngine` for `Agent(engine=...)`, so a bridged session is
an ordinary session of ours — its log, claims, busy and cancel, replay (`session/load` in a
new process), `session/list`, traces and metrics are the native ones — and the ACP
transport serves it unchanged. A turn: `run_started`; the user's message (`user_message`,
and `session_info` with a title on the first prompt); then an AG-UI run whose input is the
conversation so far (`request.py`), streamed into the turn's events (`mapping.py`) within
the run deadline and under the turn's cancel token — `session/cancel` aborts the stream,
which is also how our own server is told to stop (it cancels a run whose client left).
A run that ends in an interrupt is answered by the person (`interrupts.py`) and resumed,
in the same turn, with `resume[]` (ag-ui-langgraph's CUSTOM `on_interrupt` likewise,
answered in `forwardedProps.command.resume`); steering and follow-ups queued meanwhile go
out as the next run. Calls the server left for its own client (frontend tools) cannot run in an
editor: they get a failed result saying so. The turn ends with exactly one `run_finished`
(stop reason from the last run's outcome) or `run_failed`: the server's RUN_ERROR with its
message and code, or the bridge's own (`agui_unreachable`, `agui_bad_response`,
`agui_stalled`, `agui_disconnected`, `agui_timeout`, `agui_incomplete_run`), never a
traceback. Events are recorded through the turn's `TurnRecorder`, as our own loop records.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from ag_ui.core import ResumeEntry, RunAgentInput

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding.surrogates import scrub
from steerable_bridge.runtime.events import StopReason
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.turns.recorder import TurnRecorder
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import ContentPart, TextPart
from steerable_bridge.transports.agui.bridge.calls import BridgedCall, ids_in
from steerable_bridge.transports.agui.bridge.endpoint import AguiEndpoint, BridgeError
from steerable_bridge.transports.agui.bridge.interrupts import answer_interrupts
from steerable_bridge.transports.agui.bridge.mapping import EventMapper
from steerable_bridge.transports.agui.bridge.request import run_input

__all__ = ["MAX_RUNS_PER_TURN", "AguiEngine"]

log = logging.getLogger(__name__)

MAX_RUNS_PER_TURN = 32
"""AG-UI runs one turn may make (resumes and steering included) before it fails."""

BUSY_RETRIES = 5
BUSY_BACKOFF_S = 0.2
"""A server still finishing the thread's last (cancelled) run answers 409: retry briefly."""


class AguiEngine:
    """Runs each turn of a bridged session on the AG-UI endpoint (module docstring)."""

    def __init__(self, endpoint: AguiEndpoint, *, max_runs: int = MAX_RUNS_PER_TURN) -> None:
        self.endpoint = endpoint
        self.max_runs = max_runs

    async def __call__(self, ctx: TurnContext, turn: TurnInput) -> RunOutcome:
        return await _BridgedTurn(ctx, turn, self).run()


def _frontend(call: BridgedCall) -> str:
    return (
        f"the AG-UI server left {call.name} for its own web client to run (a frontend tool);"
        " an editor cannot run it through the bridge, so it did not run"
    )


def _unanswered(call: BridgedCall) -> str:
    return f"the AG-UI server ended its run without a result for {call.name}"


class _BridgedTurn:
    """One bridged turn: its recorder (`rec`), its mapper and how it ends."""

    def __init__(self, ctx: TurnContext, turn: TurnInput, engine: AguiEngine) -> None:
        self.ctx, self.turn = ctx, turn
        self.rec = TurnRecorder(ctx, turn)
        self.endpoint = engine.endpoint
        self.max_runs = engine.max_runs
        self.mapper = EventMapper(
            self.rec.emit,
            self.rec.new_id,
            taken=ids_in(ctx.log.view().folded()),  # ids only: runs of deltas need no expanding
            state=lambda: ctx.facts.state,
        )
        self.stopped = False

    async def run(self) -> RunOutcome:
        ctx, turn = self.ctx, self.turn
        try:
            await self.rec.emit(
                ev.RunStarted, model=ctx.model, trace_id=ctx.trace_id, **turn.run_started_fields()
            )
            if turn.state_json is not None:
                await self.rec.emit(ev.StateSnapshot, state_json=turn.state_json)
            if turn.content:
                await self._user(ev.UserMessage, turn.content, turn.message_id)
                if ctx.facts.title is None:
                    await self.rec.emit(ev.SessionInfo, title=_title(turn.content))
            elif turn.compact:
                return await self.finish("end_turn")  # the far server keeps its own context
            return await self._runs()
        except BridgeError as error:
            return await self.fail(error.code, error.message)
        except StoreError as error:
            log.warning("run %s: the session store failed: %s", self.rec.run_id, error.message)
            return await self.fail(error.code, error.message)
        except Exception as error:  # a bug: keep the session consistent, then report
            log.exception("bridged run %s failed with an unexpected error", self.rec.run_id)
            return await self.fail("internal_error", f"{type(error).__name__}: {error}")

    async def _user(
        self,
        cls: type[ev.UserMessage] | type[ev.SteerApplied] | type[ev.FollowUpApplied],
        content: tuple[ContentPart, ...],
        message_id: str | None,
    ) -> None:
        await self.rec.emit(cls, message_id=message_id or self.rec.new_id("user"), content=content)

    async def _runs(self) -> RunOutcome:
        ctx, mapper = self.ctx, self.mapper
        resume: tuple[ResumeEntry, ...] = ()
        forwarded: dict[str, Any] | None = None
        agui_run, parent = self.rec.run_id, None
        for _ in range(self.max_runs):
            if ctx.cancel.cancelled:
                return await self.finish("cancelled")
            request = run_input(
                ctx.log.session_id,
                agui_run,
                ctx.log.view().folded(),  # messages join their deltas: read each run as one
                state=ctx.facts.state,
                resume=resume,
                parent_run_id=parent,
                forwarded_props=forwarded,
            )
            ended = await self._stream(request)
            if ctx.cancel.cancelled:
                return await self.finish("cancelled")
            ending = mapper.ending
            if ending is not None and ending.failed:
                return await self.fail(ending.code, ending.message)
            if not ended or ending is None:
                raise BridgeError(
                    "agui_incomplete_run",
                    f"the AG-UI server at {self.endpoint.url} ended the stream without"
                    " RUN_FINISHED or RUN_ERROR; check its logs and send the prompt again",
                )
            await mapper.close_open()
            again = {i.id for i in ending.interrupts} if ending.outcome == "interrupt" else set()
            await mapper.complete_all(again)
            parent, agui_run = agui_run, self.rec.new_id("run")
            if ending.outcome == "interrupt" and ending.interrupts:
                answers = await answer_interrupts(ctx, self.rec.emit, mapper, ending.interrupts)
                if ctx.cancel.cancelled:
                    return await self.finish("cancelled")
                self.stopped = self.stopped or answers.stop
                resume, forwarded = answers.resume, None
                if ending.legacy:  # ag-ui-langgraph: one answer, in forwardedProps
                    first = answers.resume[0]
                    answer = first.payload if first.status == "resolved" else {"approved": False}
                    resume, forwarded = (), {"command": {"resume": answer}}
                continue
            resume, forwarded = (), None
            await mapper.settle_calls("failed", "frontend_tool", _frontend)
            if ending.outcome == "cancelled":
                return await self.finish("rejected" if self.stopped else "cancelled")
            if self.stopped:
                return await self.finish("rejected")
            if not await self._queued():
                return await self.finish("end_turn")
        raise BridgeError(
            "agui_too_many_runs",
            f"the turn made {self.max_runs} AG-UI runs without the server finishing;"
            " check the server, or send a new prompt",
        )

    async def _queued(self) -> bool:
        """Log steering (or, when none, follow-ups) queued meanwhile; True if any."""
        steering = self.ctx.steering.take()
        for content, message_id in steering:
            await self._user(ev.SteerApplied, content, message_id)
        if steering:
            return True
        follow_ups = self.ctx.follow_ups.take()
        for content, message_id in follow_ups:
            await self._user(ev.FollowUpApplied, content, message_id)
        return bool(follow_ups)

    async def _stream(self, request: RunAgentInput) -> bool:
        """One AG-UI run into the mapper, under the cancel token and the run deadline."""
        self.mapper.begin_run()
        deadline = self.endpoint.settings.run_timeout_s
        before = self.mapper.handled
        ended = False
        for attempt in range(BUSY_RETRIES + 1):
            try:
                with self.ctx.cancel.scope(), anyio.fail_after(deadline):
                    ended = await self.endpoint.run(request, self.mapper.handle)
                return ended
            except TimeoutError:
                raise BridgeError(
                    "agui_timeout",
                    f"the AG-UI run did not finish within {deadline:g}s; allow it longer with"
                    " --agui-timeout, or ask for something smaller",
                ) from None
            except BridgeError as error:
                if not _busy(error) or attempt == BUSY_RETRIES or self.mapper.handled > before:
                    raise
                log.info("the AG-UI thread is still busy; retrying (%s)", error.message)
                with self.ctx.cancel.scope():
                    await anyio.sleep(BUSY_BACKOFF_S * (attempt + 1))
                if self.ctx.cancel.cancelled:
                    return False
        return ended

    # -- ending -------------------------------------------------------------------------------

    async def _close(self, status: str) -> None:
        await self.mapper.close_open()
        await self.mapper.settle_calls(
            "cancelled" if status == "cancelled" else "failed",
            "cancelled" if status == "cancelled" else "run_failed",
            (lambda call: f"the turn was cancelled before {call.name} finished")
            if status == "cancelled"
            else _unanswered,
        )

    async def finish(self, stop_reason: StopReason) -> RunOutcome:
        with anyio.CancelScope(shield=True):
            await self._close("cancelled" if stop_reason == "cancelled" else "done")
            await self.rec.emit(ev.RunFinished, stop_reason=stop_reason, usage=self.mapper.usage)
        return RunOutcome(run_id=self.rec.run_id, stop_reason=stop_reason, usage=self.mapper.usage)

    async def fail(self, code: str, message: str) -> RunOutcome:
        message = scrub(message)
        with anyio.CancelScope(shield=True):
            if not self.rec.ended:
                await self._close("failed")
                await self.rec.emit(ev.RunFailed, code=code, message=message)
        return RunOutcome(
            run_id=self.rec.run_id,
            stop_reason=None,
            usage=self.mapper.usage,
            error_code=code,
            error_message=message,
        )


def _busy(error: BridgeError) -> bool:
    return error.status == 409


def _title(content: tuple[ContentPart, ...]) -> str:
    text = " ".join(" ".join(p.text for p in content if isinstance(p, TextPart)).split())
    if not text:
        return "New session"
    return text if len(text) <= 60 else text[:57] + "..."
