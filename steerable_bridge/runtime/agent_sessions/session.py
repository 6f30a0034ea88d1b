"""A session: one conversation's log, its settings, and the one turn it may be running.

`Session.prompt(turn, sink)` runs a turn (see `loop.py`) and refuses a second concurrent one
with `SessionBusy` — or `SessionOwned` when another process sharing the store runs one: a
turn holds the store's claim on the session, and first takes in whatever other processes
appended (closing a turn a dead one left open). While a turn runs, `cancel()`, `steer()`
and `follow_up()` reach it.
Everything durable about a session — title, mode, model, remembered permissions, shared
state, open tool calls — is folded from its log (`SessionFacts`), so a reloaded session
continues exactly where it stopped. Transports get sessions from `Agent` (`agent.py`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.cache_drift import CacheDriftMonitor
from steerable_bridge.runtime.model_context.compaction import Compactor
from steerable_bridge.runtime.model_context.projection import SessionFacts, session_facts
from steerable_bridge.runtime.model_context.tokens import RequestEstimator
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.ports.observe import observed_run
from steerable_bridge.runtime.ports.permissions import PermissionPolicy, StaticPolicy
from steerable_bridge.runtime.ports.questions import ASK_USER, ASK_USER_NAME, Questions
from steerable_bridge.runtime.ports.storage import SessionBusy, StoreError, claim_session
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.session_log.recovery import close_interrupted_run
from steerable_bridge.runtime.tool_calls.exposure import ToolShelf
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.loop import run_turn
from steerable_bridge.runtime.turns.steering import InputQueue
from steerable_bridge.runtime.turns.turn import EventSink, RunOutcome, TurnContext, TurnInput
from steerable_bridge.runtime.values import ContentPart

if TYPE_CHECKING:
    from steerable_bridge.runtime.agent_sessions.agent_config import AgentConfig
    from steerable_bridge.runtime.agent_sessions.registry import Registry, Scope
    from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
    from steerable_bridge.runtime.model_context.tokens import TokenCalibration
    from steerable_bridge.runtime.ports.observe import Observer
    from steerable_bridge.runtime.ports.storage import SessionStore
    from steerable_bridge.runtime.tool_calls.approvals import ApprovalMemory
    from steerable_bridge.runtime.tool_calls.bounding import Spill
    from steerable_bridge.runtime.turns.hooks import Hook
    from steerable_bridge.runtime.turns.turn import TurnEngine

__all__ = ["Session", "SessionBusy", "SessionHost"]

log = logging.getLogger(__name__)

_FINAL_KINDS = frozenset({"run_finished", "run_failed"})


class SessionHost(Protocol):
    """What a session reads from the agent that made it; `Agent` (`agent.py`) is the one
    implementation. Naming it here keeps this module from importing the agent module."""

    config: AgentConfig
    store: SessionStore
    router: ModelRouter
    engine: TurnEngine | None
    observers: tuple[Observer, ...]
    approvals: ApprovalMemory | None
    spill: Spill | None
    tools: Registry[Tool]
    hooks: Registry[Hook]
    calibration: TokenCalibration

    def scope_of(self, session: Session) -> Scope: ...

    def system_prompt(self, session: Session) -> str: ...

    def keep(self, session: Session) -> None: ...


class Session:
    """One conversation. Create or load it through `Agent`."""

    def __init__(self, agent: SessionHost, log: SessionLog, *, cwd: str, model: str) -> None:
        self.agent = agent
        self.log = log
        self.cwd = cwd
        self.facts: SessionFacts = session_facts(log.view().folded())
        self.default_model = model
        self.policy: PermissionPolicy = StaticPolicy(agent.config.approval)
        self.environment: Environment | None = None
        self.extra_tools: tuple[Tool, ...] = ()
        self.questions: Questions | None = None
        """How the model's questions reach the person; None: no `ask_user` tool."""
        self.steering = InputQueue()
        self.follow_ups = InputQueue()
        self.cache_drift = CacheDriftMonitor()
        self.estimator = RequestEstimator()
        """Estimates this session's requests, each from what is new since the last one."""
        self.shelf = ToolShelf(agent.config.quality.tool_budget)
        """Which tools steps offer and what `tool_search` found (`exposure.py`)."""
        self.notes = ""
        """Project notes for the system prompt (read by the agent when it makes the session)."""
        self.compactor = Compactor(agent.config.compaction, calibration=agent.calibration)
        self.advised = False
        """The agent's advisories were logged in a turn of this session (in this process)."""
        self._running: CancelToken | None = None
        self._claiming = anyio.Lock(fast_acquire=True)
        """Serialises this session's own claims (a turn, or a record outside one); taking it
        uncontended does not yield the loop, so a turn's first event is not one more loop
        pass away from its request."""
        self.closed = False

    @property
    def id(self) -> str:
        return self.log.session_id

    @property
    def model(self) -> str:
        return self.facts.config.get("model", self.default_model)

    @property
    def mode(self) -> str:
        return self.facts.mode_id or "default"

    @property
    def running(self) -> bool:
        return self._running is not None

    def tools(self) -> tuple[Tool, ...]:
        """The tools the next step will offer: registered for this session's scope, plus extras."""
        registered = self.agent.tools.snapshot(self.agent.scope_of(self))
        extra = self.extra_tools
        if self.questions is not None and all(t.name != ASK_USER_NAME for t in extra):
            extra = (*extra, ASK_USER)
        names = {tool.name for tool in extra}
        return tuple(t for t in registered if t.name not in names) + extra

    async def prompt(
        self,
        turn: TurnInput,
        sink: EventSink | None = None,
        *,
        cancel: CancelToken | None = None,
        on_start: Callable[[CancelToken], Any] | None = None,
        provider: ModelProvider | None = None,
    ) -> RunOutcome:
        """Run one turn. Raises `SessionBusy`, `SessionOwned` (another process is running a
        turn here), or `RouteError` before the turn logs anything. `provider` is the model's
        provider when the caller already resolved the session's route for this prompt."""
        if self._running is not None:
            raise SessionBusy(self.id)
        token = cancel or CancelToken()
        self._running = token
        self.agent.keep(self)  # a session forgotten while idle is known again while it runs
        outcome: RunOutcome | None = None
        try:
            async with self._claiming, claim_session(self.agent.store, self.id):
                try:
                    route = self.model
                    await self.catch_up()
                    if provider is None or self.model != route:  # another process switched it
                        provider = self.agent.router.resolve(self.model)
                    if on_start is not None:
                        on_start(token)
                    outcome = await self._run(turn, sink, token, provider)
                    return outcome
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._commit_after(outcome)
                    self.log.fold()  # the turn's deltas are stored: memory keeps them folded
        finally:
            self._running = None

    async def _commit_after(self, outcome: RunOutcome | None) -> None:
        """The turn's last commit. When the turn already failed and said so (a full disk),
        a store that still refuses is logged: the events stay pending in the log and are
        written by the next commit, before anything newer."""
        try:
            await self.log.commit()
        except StoreError as error:
            if outcome is None or outcome.error_code is None:
                raise
            log.warning(
                "session %s: %d events wait for the store (%s); they are written first when"
                " it accepts writes again",
                self.id,
                self.log.uncommitted,
                error.message,
            )

    async def _run(
        self, turn: TurnInput, sink: EventSink | None, token: CancelToken, provider: ModelProvider
    ) -> RunOutcome:
        """The turn itself, watched by the agent's observers (tracing, metrics, log ids)."""
        with observed_run(
            self.agent.observers, self.id, sink, traceparent=turn.traceparent
        ) as observed:
            context = TurnContext(
                log=self.log,
                facts=self.facts,
                cwd=self.cwd,
                model=self.model,
                provider=provider,
                system=self.agent.system_prompt(self),
                tools=self.tools(),
                policy=self.policy,
                environment=self.environment,
                approvals=self.agent.approvals,
                steering=self.steering,
                follow_ups=self.follow_ups,
                cancel=token,
                sink=observed.sink,
                settings=self.agent.config.loop,
                compactor=self.compactor,
                output_limits=self.agent.config.output_limits,
                spill=self.agent.spill,
                snapshot=lambda: (self.agent.system_prompt(self), self.tools()),
                hooks=self.agent.hooks.snapshot(self.agent.scope_of(self)),
                quality=self.agent.config.quality,
                calibration=self.agent.calibration,
                estimator=self.estimator,
                cache_drift=self.cache_drift,
                trace_id=observed.trace_id,
                shelf=self.shelf,
                questions=self.questions,
                advisories=() if self.advised else self.agent.config.advisories,
            )
            self.advised = True
            done = anyio.Event()
            async with anyio.create_task_group() as flusher:
                flusher.start_soon(self._flush_every, context.settings.commit_interval_s, done)
                try:
                    outcome = await (self.agent.engine or run_turn)(context, turn)
                finally:
                    done.set()  # the flusher returns on its own: no cancellation to unwind
            return dataclasses.replace(
                outcome,
                trace_id=observed.trace_id or outcome.trace_id,
                final_event=outcome.final_event or self._final_event(outcome.run_id),
            )

    def _final_event(self, run_id: str) -> ev.LoopEvent | None:
        """The run's closing event, when it is the last one logged."""
        view = self.log.view()
        last = view[-1] if len(view) else None
        if last is not None and last.run_id == run_id and last.kind in _FINAL_KINDS:
            return last
        return None

    async def _flush_every(self, interval: float, done: anyio.Event) -> None:
        """Commit streamed events at least every `interval` s, even while the model stalls,
        until `done` is set."""
        while not done.is_set():
            with anyio.move_on_after(interval):
                await done.wait()
            if self.log.uncommitted and not done.is_set():
                with anyio.CancelScope(shield=True):
                    try:
                        await self.log.commit()
                    except StoreError as error:  # the turn's next commit ends it with the code
                        log.warning("session %s: cannot flush the log: %s", self.id, error.message)
                        return

    async def refresh(self) -> list[ev.LoopEvent]:
        """Take in what other processes appended since this session was read, without
        claiming it (a turn they left open stays open); returns those events."""
        if self._running is not None:
            return []
        async with self._claiming:
            if self._running is not None:
                return []
            await self.log.commit()
            newer = await self.agent.store.read(self.id, after_seq=self.log.next_seq - 1)
            if newer:
                self.log.adopt(newer)
                for event in newer:
                    self.facts.observe(event)
            return newer

    async def catch_up(self) -> None:
        """Take in what other processes appended since this session was read, and close a
        turn a dead process left open. Call it while holding the session's claim."""
        await self.log.commit()
        newer = await self.agent.store.read(self.id, after_seq=self.log.next_seq - 1)
        if newer:
            self.log.adopt(newer)
            for event in newer:
                self.facts.observe(event)
        if close_interrupted_run(self.log, self.facts):
            await self.log.commit()

    def cancel(self, reason: str = "cancelled by the client") -> bool:
        """Cancel the running turn; False when none runs."""
        if self._running is None:
            return False
        self._running.cancel(reason)
        return True

    def request_compact(self) -> bool:
        """Compact at the running turn's next step boundary; False when idle (then run a
        turn with `TurnInput(compact=True)`, which compacts without calling the model)."""
        if self._running is None:
            return False
        self.compactor.request()
        return True

    def steer(self, content: tuple[ContentPart, ...], message_id: str | None = None) -> bool:
        """Queue a message for the running turn's next step boundary (logged under
        `message_id` when the client named it); False when idle."""
        if self._running is None:
            return False
        self.steering.push(content, message_id)
        return True

    def follow_up(self, content: tuple[ContentPart, ...], message_id: str | None = None) -> bool:
        """Queue a message taken when the running turn would otherwise end; False when idle."""
        if self._running is None:
            return False
        self.follow_ups.push(content, message_id)
        return True

    async def record(self, cls: type[ev.EventBase], **fields: Any) -> ev.LoopEvent:
        """Log a session-level event outside any turn (mode, config, commands)."""
        if self._running is not None:
            return await self._record(cls, fields)
        async with self._claiming:
            if self._running is not None:  # a turn started while we waited: it holds the claim
                return await self._record(cls, fields)
            async with claim_session(self.agent.store, self.id):
                await self.catch_up()
                return await self._record(cls, fields)

    async def _record(self, cls: type[ev.EventBase], fields: dict[str, Any]) -> ev.LoopEvent:
        event: ev.LoopEvent = self.log.record(cls, "", **fields)  # type: ignore[assignment]
        self.facts.observe(event)
        await self.log.commit()
        return event
