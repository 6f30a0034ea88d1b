"""Threads: the AG-UI `threadId` → runtime session map, and one run of a thread, streamed.

`Threads(agent)` keeps one `Thread` per `threadId`: its session (loaded or created with
`session_id = threadId`, so history stays on the server across runs), whether a run holds
it, the message ids the client already has, and the last seq it was sent (events logged
between runs, such as the earlier user messages of one request, travel right after the next
RUN_STARTED), and the events before the tail a reloaded session holds (`earlier`: the
MESSAGES_SNAPSHOT is the whole conversation, compaction or not). `claim(thread_id)` is
synchronous, so two requests racing for one thread can never both get it; the run
releases it when its stream closes — or, when its client
disconnected, as soon as the cancelled turn is logged, and a request that arrives while that
cancellation settles waits for it (`claim_settled`, at most `SETTLE_WAIT_S`) instead of
getting 409. `prepare(...)` turns a validated `RunAgentInput` into a `Run` (raising `InputError`
before anything is sent), and `Run.produce(write)` runs the turn, renders every LoopEvent
(`renderer.py`, `wire.py`) and writes it. Sessions use `StaticPolicy(approval, defer=True)`:
a tool that needs permission ends the run with an interrupt the next run answers.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace

import anyio
from ag_ui.core import Message, RunAgentInput

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent import Agent
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.idle import IdleCache
from steerable_bridge.runtime.model import ProviderError
from steerable_bridge.runtime.permissions import StaticPolicy
from steerable_bridge.runtime.replay import coalesce_deltas, merged, missing_events
from steerable_bridge.runtime.routing import RouteError
from steerable_bridge.runtime.session import Session, SessionBusy
from steerable_bridge.runtime.storage import SessionNotFound, StoreError
from steerable_bridge.transports.agui.history import known_ids, thread_messages
from steerable_bridge.transports.agui.inputs import ParsedRun, speaks_1_0, to_turn
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.stream import Write
from steerable_bridge.transports.agui.wire import SseEncoder

__all__ = ["Run", "Thread", "Threads"]

log = logging.getLogger("steerable_bridge.agui")

SETTLE_WAIT_S = 1.0
"""How long a request waits for a disconnected run of its thread to finish cancelling."""


@dataclass(slots=True)
class Thread:
    """What the server holds for one AG-UI thread."""

    thread_id: str
    session: Session | None = None
    busy: bool = False
    known: set[str] = field(default_factory=set)
    sent_seq: int = -1
    """The last seq streamed to a client; later events logged between runs go with the next."""
    holder: object | None = None
    """The claim that holds the thread (only its holder releases it)."""
    settled: anyio.Event | None = None
    """Set when a run whose client disconnected lets go of the thread."""
    earlier: tuple[LoopEvent, ...] = ()
    """The thread's events before the tail its session was loaded with (compacted away from
    the model's view but still the client's conversation), deltas coalesced."""

    def history(self, session: Session) -> list[LoopEvent]:
        """Every event of the thread, in seq order: `earlier` and the session's log."""
        view = session.log.view()
        return merged(self.earlier, view) if self.earlier else list(view)

    def release(self, holder: object | None) -> None:
        """Let go of the thread, if `holder` still holds it (a stale release is ignored)."""
        if holder is not self.holder:
            return
        self.busy = False
        self.holder = None
        if self.settled is not None:
            self.settled.set()
            self.settled = None


class Threads:
    """Every thread this server process serves."""

    def __init__(self, agent: Agent, *, cwd: str | None = None) -> None:
        self.agent = agent
        self.cwd = cwd or os.getcwd()
        self._threads: IdleCache[str, Thread] = IdleCache(
            capacity=agent.config.max_sessions, ttl_s=agent.config.session_ttl_s
        )

    def __len__(self) -> int:
        return len(self._threads)

    def get(self, thread_id: str) -> Thread:
        """The thread (made on first use). Idle threads over the agent's `max_sessions`, or
        unused for `session_ttl_s`, are forgotten; their history reloads from the store."""
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = Thread(thread_id)
            self._threads.put(thread_id, thread)
            self._threads.sweep(_idle)
        return thread

    def claim(self, thread_id: str) -> Thread | None:
        """The thread, now held by the caller; None when a run already holds it."""
        thread = self.get(thread_id)
        if thread.busy:
            return None
        thread.busy = True
        thread.holder = object()
        return thread

    async def claim_settled(self, thread_id: str) -> Thread | None:
        """`claim`, but when the run holding the thread lost its client and is cancelling,
        wait for it to let go (at most `SETTLE_WAIT_S`) instead of failing at once."""
        thread = self.get(thread_id)
        if thread.busy and thread.settled is not None:
            with anyio.move_on_after(SETTLE_WAIT_S):
                await thread.settled.wait()
        return self.claim(thread_id)

    async def session_of(self, thread: Thread) -> Session:
        """The thread's session, loaded on first use; when other processes share the store,
        brought up to date with what they appended (their runs were streamed by them)."""
        if thread.session is not None and self.agent.shares_store:
            newer = await thread.session.refresh()
            if newer:
                thread.sent_seq = max(thread.sent_seq, newer[-1].seq)
                history = thread.history(thread.session)
                thread.known |= known_ids(thread_messages(thread.thread_id, history))
        if thread.session is None:
            try:
                session = await self.agent.load_session(thread.thread_id)
            except SessionNotFound:
                session = await self.agent.new_session(self.cwd, session_id=thread.thread_id)
            session.policy = StaticPolicy(self.agent.config.approval, defer=True)
            earlier = await missing_events(session)
            thread.earlier = tuple(c.event for c in coalesce_deltas(earlier))
            thread.session = session
            thread.sent_seq = session.log.next_seq - 1  # history from before this process
            thread.known |= known_ids(thread_messages(thread.thread_id, thread.history(session)))
        return thread.session

    def forget_session(self, thread: Thread) -> None:
        """Let memory go of the thread and its session when they are idle (a run whose
        client left: nobody is watching it, and its log may be long); the next run reloads
        them from the store (everything a `Thread` holds is rebuilt from the log)."""
        session = thread.session
        if session is not None and not thread.busy and self.agent.forget(session.id):
            thread.session = None
            thread.known.clear()  # rebuilt from the log on reload
            if self._threads.peek(thread.thread_id) is thread and _idle(thread):
                self._threads.pop(thread.thread_id)

    async def prepare(
        self, thread: Thread, run: RunAgentInput, *, traceparent: str | None = None
    ) -> Run:
        """The run this input asks for; raises `InputError` (nothing sent yet).
        `traceparent` (the request's W3C header) makes the run continue the caller's trace."""
        session = await self.session_of(thread)
        parsed = to_turn(run, thread.known, session.facts.open_calls)
        if traceparent:
            parsed = replace(parsed, turn=replace(parsed.turn, traceparent=traceparent))
        return Run(thread, session, run, parsed)


def _idle(thread: Thread) -> bool:
    session = thread.session
    return (
        not thread.busy
        and thread.settled is None
        and (session is None or (not session.running and not session.log.uncommitted))
    )


class Run:
    """One AG-UI run of a thread: the turn, rendered and written as it happens."""

    def __init__(
        self, thread: Thread, session: Session, run: RunAgentInput, parsed: ParsedRun
    ) -> None:
        self.thread = thread
        self.holder = thread.holder
        self.session = session
        self.input = run
        self.parsed = parsed
        self.renderer = AguiRenderer(
            thread_id=run.thread_id,
            run_id=run.run_id,
            parent_run_id=run.parent_run_id,
            messages=self.messages,
            legacy_outcomes=not speaks_1_0(run),
        )
        self.encoder = SseEncoder(self.renderer)
        self.stop_reason: str | None = None
        self.disconnected = False
        self.wrote = False
        """Whether a frame was written (before that, a lost race is answered with a 409)."""

    def messages(self) -> list[Message]:
        """The thread for MESSAGES_SNAPSHOT; the ids it holds are known from now on."""
        messages = thread_messages(self.thread.thread_id, self.thread.history(self.session))
        self.thread.known |= known_ids(messages)
        return messages

    def disconnect(self) -> None:
        """The client went away: cancel the turn now."""
        self.disconnected = True
        if self.thread.holder is self.holder and self.thread.settled is None:
            self.thread.settled = anyio.Event()  # a new request waits for the release
        running = self.session.cancel("the AG-UI client disconnected")
        log.info(
            "thread %s run %s: client disconnected; %s",
            self.thread.thread_id,
            self.input.run_id,
            "cancelling the turn" if running else "no turn was running",
        )

    async def produce(self, write: Write) -> None:
        started = time.monotonic()
        self.thread.known |= self.parsed.new_ids
        recorded: set[str] = set()

        async def sink(event: LoopEvent) -> None:
            self.thread.sent_seq = max(self.thread.sent_seq, event.seq)
            if isinstance(event, ev.RunFinished):
                self.stop_reason = event.stop_reason
            elif isinstance(event, ev.RunFailed):
                self.stop_reason = f"failed ({event.code})"
            try:
                data = self.encoder.encode(event)
            except Exception:  # an unencodable event must not end the turn; it stays logged
                log.exception("thread %s: could not encode seq %s", event.session_id, event.seq)
                return
            self.wrote = True
            await write(data)

        try:
            for message_id, content in self.parsed.earlier:
                await self.session.record(ev.UserMessage, message_id=message_id, content=content)
                recorded.add(message_id)
            view = self.session.log.view()
            first = len(view)
            while first > 0 and view[first - 1].seq > self.thread.sent_seq:
                first -= 1
            for index in range(first, len(view)):  # logged between runs: after RUN_STARTED
                self.renderer.render(view[index])
            if not self.disconnected:  # a client gone already gets no turn
                await self.session.prompt(self.parsed.turn, sink)
        except (RouteError, ProviderError) as err:  # the model could not even be reached
            await write(
                self.encoder.encode_models(self.renderer.derived_error(err.code, err.message))
            )
        except SessionBusy as err:
            if not self.wrote:  # another process took the session since the check: a 409
                self.thread.known -= self.parsed.new_ids - recorded
                raise
            await write(self.encoder.encode_models(self.renderer.derived_error(err.code, str(err))))
        except StoreError as err:  # the store refused before the turn began (disk still full)
            log.warning("thread %s: the session store failed: %s", self.thread.thread_id, err)
            await write(
                self.encoder.encode_models(self.renderer.derived_error(err.code, err.message))
            )
        except Exception as err:
            log.exception("thread %s run %s failed", self.thread.thread_id, self.input.run_id)
            message = f"the server failed: {type(err).__name__}: {err}; see the server log"
            await write(
                self.encoder.encode_models(self.renderer.derived_error("internal_error", message))
            )
        if not self.renderer.finished:
            await write(
                self.encoder.encode_models(
                    self.renderer.derived_error(
                        "incomplete_run", "the turn ended without a final event; see the server log"
                    )
                )
            )
        log.info(
            "thread %s run %s: ended %s after %.0f ms%s",
            self.thread.thread_id,
            self.input.run_id,
            self.stop_reason or "without a stop reason",
            (time.monotonic() - started) * 1000,
            " (client disconnected)" if self.disconnected else "",
        )
        if self.disconnected:  # the cancellation is logged: the thread is free at once
            self.thread.release(self.holder)
