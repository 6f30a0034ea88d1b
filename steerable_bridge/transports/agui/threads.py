"""Threads: the AG-UI `threadId` → conversation map, and one run of a thread, streamed.

`Threads(port)` keeps one `Thread` per `threadId` with what the transport knows of it: the
conversation behind it is the agent port's, under `conversation_id = threadId` (opened on
first use with no attachments, so a tool that needs permission ends the run with an
interrupt the next run answers), and the thread holds the message ids the client already
has, the thread's messages folded from its events (`history.MessageFold`, fed from
`port.replay_after`, one event per message's deltas, so the MESSAGES_SNAPSHOT is the whole
conversation, compaction or not, and other workers' runs are taken in — left out when the
client sent back every message of the thread, or asked for none with
`forwardedProps.steerable.snapshot: false`, `Run._snapshot`), and the events this process
logged between runs that no client was sent yet (the earlier user messages of a request
whose turn never started: they travel right after the next RUN_STARTED). Who runs a thread
is the port's to say: `claim(thread_id)` takes the port's synchronous reservation, so two
requests racing for one thread can never both get it, and a request that arrives while a
run whose client disconnected is still cancelling waits for it (at most `SETTLE_WAIT_S`)
instead of getting 409 — as does one that arrives a moment before the server has seen that
disconnect (a client that aborts and posts at once: up to `DISCONNECT_GRACE_S` for it).
`prepare(...)` turns a validated `RunAgentInput` into a `Run` (raising `InputError` before
anything is sent), switching first the mode and config options its
`forwardedProps.steerable` names (`settle`), and `Run.produce(write)` runs the turn
through `port.prompt` with the reservation, renders every LoopEvent (`renderer.py`,
`wire.py`) and writes it; another process running the thread makes `prompt` raise
`SessionOwned` before anything is logged. A run whose client left gives the conversation's
memory back (`port.close`, under a reservation of its own, so never under a newer run).
Each frame a run writes sets the thread's `changed` event, which wakes the streams resuming
the thread (`resume.py`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import anyio
from ag_ui.core import Message, RunAgentInput

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.model import ProviderError
from steerable_bridge.runtime.ports.port import AgentPort, Coalesced, Conversation, Reservation
from steerable_bridge.runtime.ports.storage import SessionBusy, SessionNotFound, StoreError
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.transports.agui.first_frames import (
    FIRST_FRAMES,
    FirstFrames,
    GiveWayBudget,
)
from steerable_bridge.transports.agui.history import MessageFold
from steerable_bridge.transports.agui.inputs import (
    InputError,
    ParsedRun,
    Settings,
    command_requested,
    follow_up_requested,
    full_requests_requested,
    model_requested,
    settings_requested,
    snapshot_requested,
    speaks_1_0,
    steer_requested,
    to_turn,
)
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.requests import RequestChain
from steerable_bridge.transports.agui.stream import Write
from steerable_bridge.transports.agui.wire import SseEncoder

__all__ = ["DEFAULT_MAX_THREADS", "DEFAULT_THREAD_TTL_S", "Run", "Thread", "Threads"]

log = logging.getLogger("steerable_bridge.agui")

SETTLE_WAIT_S = 15.0
"""How long a request waits for a disconnected run of its thread to finish cancelling: our
own turns let go at once, but a bridged agent is given 10 s to end a cancelled prompt
(`AcpBridge.cancel_grace_s`; codex-acp under load took over a second, and a stop followed
at once by a new message was answered 409 when this was 1 s)."""
DISCONNECT_GRACE_S = 0.25
"""How long a request for a thread a streaming run holds waits for that run's client to turn
out gone: a client that aborts a run and posts the next message at once reaches the server on
two connections, and the new request can be read before the old connection's end is (it was
answered 409 then; the disconnect was seen within the same millisecond). A request that
races a run whose client stays gets its 409 this much later."""
DEFAULT_MAX_THREADS = 256
"""Idle threads held in memory beyond this many are forgotten (they reload from the log)."""
DEFAULT_THREAD_TTL_S = 600.0
"""Threads unused this long are forgotten (they reload from the log)."""


@dataclass(slots=True)
class Thread:
    """What the server holds for one AG-UI thread (see the module docstring)."""

    thread_id: str
    known: set[str] = field(default_factory=set)
    fold: MessageFold | None = None
    """The thread's messages so far; None until its history is first read."""
    seq: int = -1
    """The seq of the last event folded into `fold`."""
    learned: tuple[int, int] = (0, 0)
    """How far `known` holds the ids of `fold` (`MessageFold.mark`)."""
    unsent: list[LoopEvent] = field(default_factory=list)
    """Events this process logged between runs that no client was sent yet."""
    settling: anyio.Event | None = None
    """Set when a run whose client disconnected has ended and let go of the thread."""
    left: anyio.Event | None = None
    """Set (and dropped) when a run of the thread loses its client (`DISCONNECT_GRACE_S`)."""
    changed: anyio.Event | None = None
    """Set (and cleared) when a run here wrote a frame: wakes streams resuming the thread."""
    streams: int = 0
    """Runs of this thread being served now (memory keeps the thread while any is)."""
    requests: RequestChain = field(default_factory=RequestChain)
    """The thread's newest request, folded from its log and its runs: what the next
    `model_request` is sent by reference to (`requests.py`)."""

    def take(self, events: Sequence[LoopEvent]) -> None:
        """Fold the events not folded yet (two readers of one tail never fold it twice)."""
        self._fold((event, event.seq) for event in events)

    def take_replay(self, items: Sequence[Coalesced]) -> None:
        """`take` for events read with each message's deltas coalesced (`replay_after`)."""
        self._fold((item.event, item.last_seq) for item in items)

    def _fold(self, events: Iterable[tuple[LoopEvent, int]]) -> None:
        fold = self.fold
        if fold is None:
            fold = self.fold = MessageFold(self.thread_id)
        seq = self.seq
        requests = self.requests
        for event, last in events:
            if last > seq:
                fold.event(event)
                requests.note(event)
                seq = last
        self.seq = seq

    def messages(self) -> list[Message]:
        """The thread as AG-UI messages; the ids they hold are known from now on."""
        if self.fold is None:
            return []
        messages = self.fold.messages()
        self.learn()
        return messages

    def learn(self) -> None:
        """Know every id the thread's messages hold (without building the messages; only
        those the fold gained since the last call are added)."""
        fold = self.fold
        if fold is not None:
            self.known.update(fold.ids_since(self.learned))
            self.learned = fold.mark()

    def size(self) -> int:
        """How many messages the thread holds now (`MessageFold.covered_by`'s `before`)."""
        return 0 if self.fold is None else len(self.fold.order)

    def forget(self) -> None:
        """Drop what was read of the history (it is read again when next needed)."""
        self.fold = None
        self.seq = -1
        self.learned = (0, 0)
        self.known.clear()
        self.unsent.clear()
        self.requests.forget()


class Threads:
    """Every thread this server process serves, over one agent port."""

    def __init__(
        self,
        port: AgentPort,
        *,
        cwd: str | None = None,
        max_threads: int = DEFAULT_MAX_THREADS,
        thread_ttl_s: float = DEFAULT_THREAD_TTL_S,
        first_frames: FirstFrames = FIRST_FRAMES,
    ) -> None:
        self.port = port
        self.cwd = cwd or os.getcwd()
        self._threads: IdleCache[str, Thread] = IdleCache(capacity=max_threads, ttl_s=thread_ttl_s)
        self.loading = 0
        """Cold threads whose history is being read now (`conversation`)."""
        self.starting = 0
        """Runs prepared that have not written their first frame yet."""
        self.first_frames = first_frames
        """Requests waiting for their first frame, these runs among them (`first_frames.py`:
        the HTTP protocol counts them from their accept, a run from its start)."""

    def run_starting(self) -> None:
        self.starting += 1
        self.first_frames.arrived()

    def run_started(self) -> None:
        self.starting -= 1
        self.first_frames.answered()

    def must_give_way(self) -> bool:
        """Whether a request waits for its first frame (a run here, or one still on its
        way through the HTTP protocol)."""
        return self.first_frames.pending()

    async def give_way(self) -> None:
        """Let the requests still waiting for their first frame go first: a run already
        streaming parks (at most `first_frames.GIVE_WAY_S`) until none waits, so in a burst a
        new run's RUN_STARTED does not queue behind the others' streaming."""
        await self.first_frames.give_way()

    def __len__(self) -> int:
        return len(self._threads)

    def get(self, thread_id: str) -> Thread:
        """The thread (made on first use). Idle threads over `max_threads`, or unused for
        `thread_ttl_s`, are forgotten; their history reloads from the log."""
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = Thread(thread_id)
            self._threads.put(thread_id, thread)
            self._threads.sweep(_idle)
        return thread

    def discard(self, thread: Thread) -> None:
        """Forget `thread` itself when it is idle (a run whose client left: nothing of it
        need outlive the burst in memory; the next run rebuilds it from the log)."""
        if self._threads.peek(thread.thread_id) is thread and _idle(thread):
            self._threads.pop(thread.thread_id)

    async def claim(self, thread_id: str) -> tuple[Thread, Reservation] | None:
        """The thread and the port's hold on it; None when a turn or another request has
        it — unless the run holding it lost its client and is cancelling: then this waits
        for it to let go (at most `SETTLE_WAIT_S`) and tries once more."""
        thread = self.get(thread_id)
        hold = self.port.reserve(thread_id)
        if hold is None and thread.settling is None and thread.streams:
            # a run streams it: its client may be gone already, its disconnect not yet read
            if thread.left is None:
                thread.left = anyio.Event()
            left = thread.left
            with anyio.move_on_after(DISCONNECT_GRACE_S):
                await left.wait()
            if not left.is_set():  # its client stays: the run is busy, whether or not it ended
                return None
            hold = self.port.reserve(thread_id)
        if hold is None and thread.settling is not None:
            with anyio.move_on_after(SETTLE_WAIT_S):
                await thread.settling.wait()
            hold = self.port.reserve(thread_id)
        return None if hold is None else (thread, hold)

    async def catch_up(self, thread: Thread, *, learn_ids: bool = True) -> None:
        """Fold what the conversation logged since the thread last looked (all of it the
        first time; raises `SessionNotFound` when there is no such conversation), and
        learn the ids the client may send back for it — unless the caller is about to
        build the messages anyway (`learn_ids=False`: a run's snapshot)."""
        before = thread.seq if thread.fold is not None else None
        thread.take_replay(await self.port.replay_after(thread.thread_id, thread.seq))
        if learn_ids and thread.seq != before:
            thread.learn()

    async def conversation(self, thread: Thread, *, user: str | None = None) -> Conversation:
        """The thread's conversation, opened on first use (as `user`'s), with its history
        taken in."""
        cold = thread.fold is None
        self.loading += cold
        try:
            try:
                await self.catch_up(thread)
            except SessionNotFound:
                conversation = await self.port.open(
                    self.cwd, conversation_id=thread.thread_id, user=user
                )
                thread.forget()  # a conversation deleted under the thread starts afresh
                thread.take(())
                return conversation
            return await self.port.load(thread.thread_id)
        finally:
            self.loading -= cold

    def can_defer(self, thread: Thread, run: RunAgentInput) -> bool:
        """Whether `run` may open its stream before the thread's history is read: a plain
        run (no resume answers, steer, follow-up, command, settings or model) of a thread not
        read yet."""
        settings = settings_requested(run)
        return (
            thread.fold is None
            and not run.resume
            and not steer_requested(run)
            and not follow_up_requested(run)
            and command_requested(run) is None
            and settings == Settings()
            and model_requested(run) is None
        )

    async def prepare(
        self,
        thread: Thread,
        hold: Reservation,
        run: RunAgentInput,
        *,
        traceparent: str | None = None,
        user: str | None = None,
        defer: bool = False,
    ) -> Run:
        """The run this input asks for, holding `hold`; raises `InputError` (nothing sent
        yet). `traceparent` (the request's W3C header) makes the run continue the caller's
        trace; a new thread is stored as `user`'s. `defer` (other threads' histories are
        being read: a burst) lets a run that `can_defer` read its thread's history only once
        its stream is open, after a derived RUN_STARTED, so its first event waits for no
        load; a failure to read it or a lost claim then ends the stream with RUN_ERROR (its
        code) instead of 503/409."""
        snapshot = snapshot_requested(run)
        full_requests_requested(run)  # its mistake is a 422 before anything is sent
        if defer and self.can_defer(thread, run):
            to_turn(run, frozenset(), ())  # its mistakes are the 422s of a read thread's
            return Run(
                self, thread, hold, run, None, traceparent=traceparent, user=user, snapshot=snapshot
            )
        conversation = await self.conversation(thread, user=user)
        waiting = (*conversation.open_calls, *conversation.open_questions)
        parsed = to_turn(run, thread.known, waiting)
        await self.settle(thread, settings_requested(run))
        model = model_requested(run)
        if model is not None and model != conversation.model:
            try:
                await self.port.set_model(conversation.conversation_id, model)
            except ValueError as err:
                raise InputError(
                    "unknown_model",
                    f"{err}; pick one of custom.steerable.models in GET /agent/capabilities",
                ) from None
        return Run(self, thread, hold, run, parsed, traceparent=traceparent, snapshot=snapshot)

    async def settle(self, thread: Thread, settings: Settings) -> None:
        """Switch the mode and config options a request names, before its turn (a bridged
        agent's are its own); what changed is logged and goes out after RUN_STARTED. An
        unknown mode or option raises `InputError` naming what there is."""
        try:
            if settings.mode is not None:
                changed = await self.port.set_mode(thread.thread_id, settings.mode)
                thread.unsent.extend([changed] if changed is not None else [])
        except ValueError as err:
            raise InputError("unknown_mode", str(err)) from None
        for option_id, value in settings.options:
            try:
                changed = await self.port.set_option(thread.thread_id, option_id, value)
            except ValueError as err:
                raise InputError("unknown_option", str(err)) from None
            thread.unsent.extend([changed] if changed is not None else [])


def _idle(thread: Thread) -> bool:
    return thread.streams == 0 and thread.settling is None


_EMPTY = ParsedRun(turn=TurnInput())
"""A deferred run's input until its thread is read."""


class Run:
    """One AG-UI run of a thread: the turn, rendered and written as it happens."""

    def __init__(
        self,
        threads: Threads,
        thread: Thread,
        hold: Reservation,
        run: RunAgentInput,
        parsed: ParsedRun | None,
        *,
        traceparent: str | None = None,
        user: str | None = None,
        snapshot: bool = True,
    ) -> None:
        self.threads = threads
        self.snapshot = snapshot
        """False: the client asked for no MESSAGES_SNAPSHOT (`snapshot_requested`)."""
        self.user = user
        """Who sent it: a thread it opens (deferred, once the stream is open) is theirs."""
        self.port = threads.port
        self.thread = thread
        self.hold = hold
        self.input = run
        self.traceparent = traceparent
        self.parsed = self._traced(parsed) if parsed is not None else _EMPTY
        self.deferred = parsed is None
        """The thread's history is read once the stream is open (`Threads.prepare`)."""
        self.before = thread.size()
        """The thread's messages before this run (those the client must have sent back)."""
        self.renderer = AguiRenderer(
            thread_id=run.thread_id,
            run_id=run.run_id,
            parent_run_id=run.parent_run_id,
            messages=self._snapshot,
            legacy_outcomes=not speaks_1_0(run),
            requests=thread.requests,
            full_requests=full_requests_requested(run),
        )
        self.encoder = SseEncoder(self.renderer, messages_json=self._messages_json)
        self.cancel = CancelToken()
        self.stop_reason: str | None = None
        self.prompting = False
        self.ended = False
        self.disconnected = False
        self.settling: anyio.Event | None = None
        self.wrote = False
        """Whether a frame was written (before that, a lost race is answered with a 409)."""
        self.closed = False
        self.starting = False
        """Producing, and no frame written yet (counted in `Threads.starting`)."""
        self.budget: GiveWayBudget | None = None
        """How long it may still park for others' first frames (from its own first frame)."""
        thread.streams += 1

    def _traced(self, parsed: ParsedRun) -> ParsedRun:
        if not self.traceparent:
            return parsed
        return replace(parsed, turn=replace(parsed.turn, traceparent=self.traceparent))

    def _first_frame(self) -> None:
        if self.budget is None:
            self.budget = GiveWayBudget(time.monotonic())
        if self.starting:
            self.starting = False
            self.threads.run_started()

    async def _give_way(self) -> None:
        """Park while new requests wait for their first frame, within the run's budget."""
        budget = self.budget
        if budget is None:
            return
        now = time.monotonic()
        if budget.allows(now) and self.threads.must_give_way():
            await self.threads.give_way()
            budget.spent(time.monotonic() - now)

    async def _open_deferred(self, write: Write) -> None:
        """A deferred run: RUN_STARTED out first, then the thread's history read and the
        input parsed against it."""
        self.wrote = True
        await write(self.encoder.encode_models(self.renderer.open()))
        self._first_frame()
        thread = self.thread
        conversation = await self.threads.conversation(thread, user=self.user)
        waiting = (*conversation.open_calls, *conversation.open_questions)
        self.parsed = self._traced(to_turn(self.input, thread.known, waiting))
        self.before = thread.size()

    def disconnect(self) -> None:
        """The client went away: cancel the turn now."""
        self.disconnected = True
        thread = self.thread
        if not self.ended and thread.settling is None:
            self.settling = thread.settling = anyio.Event()  # a new request waits for it
        left, thread.left = thread.left, None
        if left is not None:  # requests that came first wait for the settling now
            left.set()
        self.cancel.cancel("the AG-UI client disconnected")
        log.info(
            "thread %s run %s: client disconnected; %s",
            thread.thread_id,
            self.input.run_id,
            "cancelling the turn" if self.prompting else "no turn was running",
        )

    def close(self) -> None:
        """The stream closed: let go of the thread, whatever happened (safe twice)."""
        self.hold.release()
        self._settled()
        if not self.closed:
            self.closed = True
            self.thread.streams -= 1
            if self.disconnected and self.thread.fold is None:  # its memory was given back
                self.threads.discard(self.thread)

    def _settled(self) -> None:
        settling, self.settling = self.settling, None
        if settling is not None:
            if self.thread.settling is settling:
                self.thread.settling = None
            settling.set()

    def _snapshot(self) -> list[Message] | None:
        """The run's MESSAGES_SNAPSHOT: the whole thread — or None (no snapshot) when the
        client sent back every message the thread held before the run, so that with this
        run's stream applied it holds the thread already (a long thread is not sent again
        on every run). A new thread, tool results or resume answers (the client's own
        messages for them differ from the server's) always get one — unless the client asked
        for none (`forwardedProps.steerable.snapshot: false`): it keeps its own history, and
        the ids it sends back are learnt when the next run catches the thread up."""
        if not self.snapshot:
            return None
        thread, turn = self.thread, self.parsed.turn
        fold = thread.fold
        if fold is not None and self.before and not turn.tool_results and not turn.resume:
            sent = {message.id for message in self.input.messages}
            if fold.covered_by(sent, before=self.before):
                thread.learn()
                return None
        return thread.messages()

    def _messages_json(self, messages: list[Message]) -> Sequence[bytes]:
        """A snapshot's messages' JSON, comma-separated, as the thread's fold keeps it."""
        fold = self.thread.fold
        if fold is None:
            return [",".join(m.model_dump_json(by_alias=True) for m in messages).encode()]
        return fold.snapshot_json(messages)

    async def _snapshot_ready(self) -> None:
        """Fold the run's events into the thread before its final event is rendered (its
        MESSAGES_SNAPSHOT); once per run, never per event — and not at all for a run that
        sends none."""
        if not self.snapshot:
            return
        try:
            await self.threads.catch_up(self.thread, learn_ids=False)
        except Exception:  # a store that fails now: the snapshot holds what was folded
            log.exception("thread %s: could not read the run's events", self.thread.thread_id)

    async def produce(self, write: Write) -> None:
        started = time.monotonic()
        thread = self.thread
        recorded: set[str] = set()
        self.starting = True
        self.threads.run_starting()
        try:
            await self._turn(write, recorded)
        except (InputError, RouteError, ProviderError) as err:
            # a deferred run's input, read against its thread; or the model could not even
            # be reached
            await self._error(write, err.code, err.message)
        except SessionBusy as err:
            if not self.wrote:  # another process took the session since the check: a 409
                thread.known -= self.parsed.new_ids - recorded
                raise
            await self._error(write, err.code, str(err))
        except StoreError as err:  # the store refused before the turn began (disk still full)
            log.warning("thread %s: the session store failed: %s", thread.thread_id, err)
            await self._error(write, err.code, err.message)
        except Exception as err:
            log.exception("thread %s run %s failed", thread.thread_id, self.input.run_id)
            message = f"the server failed: {type(err).__name__}: {err}; see the server log"
            await self._error(write, "internal_error", message)
        finally:
            self._first_frame()  # (if none went out: counted no longer, whatever happened)
            self.ended = True
            self.hold.release()
        if not self.renderer.finished:
            await self._error(
                write,
                "incomplete_run",
                "the turn ended without a final event; see the server log",
            )
        log.info(
            "thread %s run %s: ended %s after %.0f ms%s",
            thread.thread_id,
            self.input.run_id,
            self.stop_reason or "without a stop reason",
            (time.monotonic() - started) * 1000,
            " (client disconnected)" if self.disconnected else "",
        )
        if self.disconnected:  # nobody watches it: give its memory back, then let go
            await self._release_memory()
            self._settled()

    async def _error(self, write: Write, code: str, message: str) -> None:
        await write(self.encoder.encode_models(self.renderer.derived_error(code, message)))

    async def _turn(self, write: Write, recorded: set[str]) -> None:
        """Open the stream (a deferred run), send what was logged between runs, then run
        the turn unless the client is gone already; `recorded` gets the ids of the earlier
        user messages this run logged."""
        thread = self.thread
        if self.deferred:
            await self._open_deferred(write)
        thread.known |= self.parsed.new_ids
        for message_id, content in self.parsed.earlier:
            said = ev.UserMessage(
                session_id="", run_id="", seq=-1, ts=0, message_id=message_id, content=content
            )
            thread.unsent.append(await self.port.record(thread.thread_id, said))
            recorded.add(message_id)
        for event in thread.unsent:  # logged between runs: sent after RUN_STARTED
            await write(self.encoder.encode(event))  # held until then (b"") if not open
        if self.disconnected:  # a client gone already gets no turn
            return

        async def sink(event: LoopEvent) -> None:
            await self._send(write, event)

        await self._give_way()  # the others' first frames, then its model call
        self.prompting = True
        try:
            await self.port.prompt(
                thread.thread_id,
                self.parsed.turn,
                sink,
                cancel=self.cancel,
                reservation=self.hold,
            )
        finally:
            self.prompting = False

    async def _send(self, write: Write, event: LoopEvent) -> None:
        """Render and write one event of the turn (the port's sink)."""
        thread = self.thread
        if isinstance(event, ev.RunFinished | ev.RunFailed):
            self.stop_reason = (
                event.stop_reason if isinstance(event, ev.RunFinished) else f"failed ({event.code})"
            )
            await self._snapshot_ready()
        elif isinstance(event, ev.RunStarted):
            thread.unsent.clear()  # the renderer sends them right after it
        try:
            data = self.encoder.encode(event)
        except Exception:  # an unencodable event must not end the turn; it stays logged
            log.exception("thread %s: could not encode seq %s", event.session_id, event.seq)
            return
        if self.starting:
            self.wrote = True
            await write(data)
            self._first_frame()
            await self._give_way()  # the others' first frames, then its model call
            return
        await self._give_way()  # new requests wait for their first frame: they go first
        await write(data)
        changed = thread.changed
        if changed is not None:  # a resumed stream follows this run
            thread.changed = None
            changed.set()

    async def _release_memory(self) -> None:
        """Close the conversation in the port's memory (its log stays) and forget the
        thread's history here — only while no newer run holds it."""
        hold = self.port.reserve(self.thread.thread_id)
        if hold is None:  # a newer request has the thread already
            return
        try:
            await self.port.close(self.thread.thread_id)
            self.thread.forget()
        except StoreError as err:  # what waits for the store is written by the next commit
            log.warning(
                "thread %s: could not close its conversation: %s", self.input.thread_id, err
            )
        finally:
            hold.release()
