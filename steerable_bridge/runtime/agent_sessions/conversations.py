"""Our runtime behind the agent port: `LocalPort(agent)` implements `port.AgentPort`.

It is the one place that knows sessions: a conversation is a `Session` (`session.py`) the
`Agent` (`agent.py`) creates, loads from the store, keeps or forgets. Attachments a
transport hands in at open become the session's permission policy (under `--approve ask` a
`ModePolicy`: over an asker, or, with none, deferring what the mode leaves to a person to
the client's next run), its questions (a questioner asks at once, none defers;
`questions=False` offers no `ask_user`), its environment and its extra tools. Busy lives
here and in the session only: a turn holds the session (`Session.running`, plus the store's
claim against other processes), and a `reserve`d conversation is held for the caller's next
`prompt`, so two requests racing for one conversation never both run. A `compact` turn that
folded nothing says why in its outcome's `notice` (the compactor's `declined`). Fork copies
the source's whole visible history into a new session's log. `list` shows only the
conversations of the port's route `family` when it is given: a bridged agent's sessions and
ours may share one store, and neither is of use to the other's clients. A bridge's engine
may speak for its far agent (`far.py`): what the port advertises (`info`), whose modes and
config options `set_mode` / `set_option` switch, and the far agent's own sessions, which
`list` shows after the port's own (cursor `far:...`), leaving out those a conversation of
ours is mapped to. `events_after` reads the visible history exactly and `replay_after` with
each message's deltas coalesced (`replay.py`: from memory, or from the store for what a
session loaded from its tail does not hold), catching up first with what other processes
sharing the store appended. A session the agent forgot while idle
(over its cap, past its TTL) and loads again gets the attachments it was opened with back,
or, when it was never attached in this process, deferred permissions — never the agent's
default policy, which would refuse what a person should be asked about.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import replace

from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge import __version__
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.model_context.projection import session_facts
from steerable_bridge.runtime.ports.far import Describes, FarConversation, ListsFar, Settles
from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.runtime.ports.permissions import MODES, ModePolicy, StaticPolicy
from steerable_bridge.runtime.ports.port import Attach, Attachments, Conversation, PortInfo
from steerable_bridge.runtime.ports.questions import Questions
from steerable_bridge.runtime.ports.storage import (
    SessionBusy,
    SessionPage,
    SessionRecord,
    read_tail,
    session_owner,
)
from steerable_bridge.runtime.session_log.replay import (
    Coalesced,
    coalesced_after,
    events_after,
    visible_log,
)
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.turn import EventSink, RunOutcome, TurnInput
from steerable_bridge.runtime.values import ContentPart

__all__ = ["LocalPort"]

LIST_PAGES = 8
"""Store pages one `list` reads at most when it filters by route family."""
FAR_CURSOR = "far:"
"""How a listing's cursor says it has moved on to the far agent's own sessions."""

_BASE_FIELDS = frozenset({"session_id", "run_id", "seq", "ts", "kind"})


class _Hold:
    """A reservation: `LocalPort` holds the conversation for its holder until released,
    and keeps its session once known, so the agent's memory cap cannot drop it between the
    holder's open or load and its prompt (a burst of new threads would reload each)."""

    __slots__ = ("_held", "_id", "session")

    def __init__(self, held: dict[str, _Hold], conversation_id: str) -> None:
        self._held = held
        self._id = conversation_id
        self.session: Session | None = None

    def release(self) -> None:
        if self._held.get(self._id) is self:
            del self._held[self._id]


class LocalPort:
    """The agent port over this process's `Agent` (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        *,
        name: str = "steerable-bridge",
        family: Callable[[str], bool] | None = None,
    ) -> None:
        self.agent = agent
        self._name = name
        self._family = family
        """Which model routes' conversations `list` shows (None: all the store holds)."""
        self._far_mapped: set[str] | None = None
        self._held: dict[str, _Hold] = {}
        self._attached: dict[str, Attachments] = {}
        """What each conversation was attached with here, for when its session reloads."""

    # -- what the agent is --------------------------------------------------------------------

    def info(self) -> PortInfo:
        info = PortInfo(
            name=self._name,
            version=__version__,
            default_model=self.agent.config.model,
            models=tuple(self.agent.router.routes),
            modes=tuple((mode, name, text) for mode, (name, text) in MODES.items()),
            tools=tuple(sorted(tool.name for tool in self.agent.tools.snapshot())),
        )
        engine = self.agent.engine
        return engine.describe(info) if isinstance(engine, Describes) else info

    async def model_info(self, route: str) -> ModelInfo:
        info = self.agent.router.resolve(route).info
        if info.needs_api_key_env:  # a login may have stored the key since
            await self.agent.router.refresh()
            info = self.agent.router.resolve(route).info
        return info

    # -- opening and closing ------------------------------------------------------------------

    async def open(
        self,
        cwd: str,
        *,
        conversation_id: str | None = None,
        model: str | None = None,
        attach: Attach | None = None,
        user: str | None = None,
    ) -> Conversation:
        session = await self.agent.new_session(
            cwd, session_id=conversation_id, model=model, user=user
        )
        self._pin(session)
        await self._attach(session, attach)
        return _conversation(session)

    async def load(
        self,
        conversation_id: str,
        *,
        cwd: str | None = None,
        attach: Attach | None = None,
        model: str | None = None,
    ) -> Conversation:
        session = await self._session(conversation_id)
        if model is not None:
            session.default_model = model
        if attach is not None:
            if session.running or conversation_id in self._held:
                raise SessionBusy(conversation_id)
            if cwd is not None:
                session.cwd = cwd
            await self._attach(session, attach)
        return _conversation(session)

    async def fork(
        self, conversation_id: str, cwd: str, *, attach: Attach | None = None
    ) -> Conversation:
        if not self.info().can_fork:  # a bridged agent's: the copy would share its session
            raise RouteError(
                "fork_unsupported",
                f"{self._name} cannot fork a conversation of the agent it bridges; open a new"
                " one instead",
            )
        source = await self._session(conversation_id)
        if source.running:
            raise SessionBusy(conversation_id)
        fork = await self.agent.new_session(cwd, model=source.model)
        for event in await visible_log(source):  # the whole history, not only the loaded tail
            fork.log.append(replace(event, session_id=fork.id))
        await fork.log.commit()
        fork.facts = session_facts(fork.log.view())
        await self._attach(fork, attach)
        return _conversation(fork)

    async def _session(self, conversation_id: str) -> Session:
        """The conversation's session; one (re)loaded from the store gets its attachments."""
        hold = self._held.get(conversation_id)
        session = hold.session if hold is not None else None
        if session is None:
            session = self.agent.get(conversation_id)
        if session is None:
            session = await self.agent.load_session(conversation_id)
            self._apply(session, self._attached.get(conversation_id, Attachments()))
        self._pin(session)
        return session

    def _pin(self, session: Session) -> None:
        hold = self._held.get(session.id)
        if hold is not None:
            hold.session = session

    async def _attach(self, session: Session, attach: Attach | None) -> None:
        attachments = Attachments() if attach is None else await attach(session.id)
        if attach is None:
            self._attached.pop(session.id, None)
        else:
            self._attached[session.id] = attachments
        self._apply(session, attachments)

    def _apply(self, session: Session, attachments: Attachments) -> None:
        approval = self.agent.config.approval
        if attachments.asker is None and approval == "ask":  # the mode says what waits
            session.policy = ModePolicy(lambda: session.mode, defer=True)
        elif attachments.asker is None:
            session.policy = StaticPolicy(approval, defer=True)
        elif approval == "ask":
            session.policy = ModePolicy(lambda: session.mode, attachments.asker)
        else:
            session.policy = StaticPolicy(approval)
        session.questions = (
            Questions(ask=attachments.questioner, modes=attachments.question_modes)
            if attachments.questions
            else None
        )
        session.environment = attachments.environment
        session.extra_tools = attachments.tools

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        engine = self.agent.engine
        if not isinstance(engine, ListsFar) or user is not None:
            # A far agent's own sessions have no owner: they are listed only single-user.
            return await self._own(cwd=cwd, cursor=cursor, limit=limit, user=user)
        if cursor is None or not cursor.startswith(FAR_CURSOR):
            page = await self._own(cwd=cwd, cursor=cursor, limit=limit, user=user)
            if page.next_cursor is not None:
                return page
            if page.records:  # ours are all listed: the far agent's own come next
                return SessionPage(records=page.records, next_cursor=FAR_CURSOR)
            cursor = FAR_CURSOR
        far = await engine.list_far(cwd=cwd, cursor=cursor[len(FAR_CURSOR) :] or None)
        if far is None:
            return SessionPage(records=())
        mapped = engine.far_ids() | await self._mapped(engine)
        fresh = tuple(r for r in far.records if r.session_id not in mapped)
        more = far.next_cursor
        return SessionPage(records=fresh, next_cursor=None if more is None else FAR_CURSOR + more)

    async def _mapped(self, engine: ListsFar) -> set[str]:
        """The far sessions this port's stored conversations are mapped to, read once per
        process (at most LIST_PAGES pages of them; later ones are known to the engine)."""
        if self._far_mapped is None:
            found: set[str] = set()
            cursor = None
            for _ in range(LIST_PAGES):
                page = await self._own(cwd=None, cursor=cursor, limit=100)
                for record in page.records:
                    session = self.agent.get(record.session_id)
                    if session is not None:
                        config = session.facts.config
                    else:
                        events = await read_tail(self.agent.store, record.session_id)
                        config = session_facts(events).config
                    far = engine.far_id(config)
                    if far is not None:
                        found.add(far)
                cursor = page.next_cursor
                if cursor is None:
                    break
            self._far_mapped = found
        return self._far_mapped

    async def _own(
        self, *, cwd: str | None, cursor: str | None, limit: int, user: str | None = None
    ) -> SessionPage:
        family = self._family
        if family is None:
            return await self.agent.list_sessions(cwd=cwd, cursor=cursor, limit=limit, user=user)
        # Each store page asks for what is still missing, so the page never exceeds `limit`
        # and the store's cursor stays exact; a store full of other families' sessions
        # costs at most LIST_PAGES reads before the caller gets a short page and a cursor.
        kept: list[SessionRecord] = []
        for _ in range(LIST_PAGES):
            page = await self.agent.list_sessions(
                cwd=cwd, cursor=cursor, limit=limit - len(kept), user=user
            )
            kept.extend(r for r in page.records if family(r.model or self.agent.config.model))
            cursor = page.next_cursor
            if cursor is None or len(kept) >= limit:
                break
        return SessionPage(records=tuple(kept), next_cursor=cursor)

    async def describe(self, conversation_id: str) -> SessionRecord | None:
        return await self.agent.session_record(conversation_id)

    async def is_running(self, conversation_id: str) -> bool:
        session = self.agent.get(conversation_id)
        if session is not None and session.running:
            return True
        return await session_owner(self.agent.store, conversation_id) is not None

    async def close(self, conversation_id: str) -> bool:
        self._held.pop(conversation_id, None)
        self._attached.pop(conversation_id, None)
        return await self.agent.close_session(conversation_id)

    async def delete(self, conversation_id: str) -> bool:
        self._held.pop(conversation_id, None)
        self._attached.pop(conversation_id, None)
        return await self.agent.delete_session(conversation_id)

    # -- turns --------------------------------------------------------------------------------

    def reserve(self, conversation_id: str) -> _Hold | None:
        if conversation_id in self._held:
            return None
        session = self.agent.get(conversation_id)
        if session is not None and session.running:
            return None
        hold = self._held[conversation_id] = _Hold(self._held, conversation_id)
        return hold

    async def prompt(
        self,
        conversation_id: str,
        turn: TurnInput,
        sink: EventSink,
        *,
        cancel: CancelToken | None = None,
        reservation: object | None = None,
    ) -> RunOutcome:
        held = self._held.get(conversation_id)
        if held is not None and held is not reservation:
            raise SessionBusy(conversation_id)
        try:
            session = await self._session(conversation_id)
            outcome = await session.prompt(turn, sink, cancel=cancel)
        finally:
            if held is not None:
                held.release()
        if turn.compact and session.compactor.declined:
            return replace(outcome, notice=session.compactor.declined)
        return outcome

    async def cancel(self, conversation_id: str, reason: str) -> bool:
        return await self.agent.cancel(conversation_id, reason)

    async def steer(
        self, conversation_id: str, content: tuple[ContentPart, ...], message_id: str | None
    ) -> bool:
        return await self.agent.steer(conversation_id, content, message_id)

    async def follow_up(
        self, conversation_id: str, content: tuple[ContentPart, ...], message_id: str | None
    ) -> bool:
        return await self.agent.follow_up(conversation_id, content, message_id)

    async def request_compact(self, conversation_id: str) -> bool:
        session = self.agent.get(conversation_id)
        return session is not None and session.request_compact()

    # -- settings and history -----------------------------------------------------------------

    async def set_mode(self, conversation_id: str, mode_id: str) -> LoopEvent | None:
        engine = self.agent.engine
        if isinstance(engine, Settles):  # the far agent's modes
            return await engine.set_mode(await self._far(conversation_id), mode_id)
        if mode_id not in MODES:
            raise ValueError(f"there is no mode {mode_id!r}; modes: {', '.join(MODES)}")
        session = await self._session(conversation_id)
        if mode_id == session.mode:
            return None
        return await session.record(ev.ModeChanged, mode_id=mode_id)

    async def set_model(self, conversation_id: str, route: str) -> LoopEvent | None:
        routes = self.agent.router.routes
        if route not in routes:
            raise ValueError(f"there is no model {route!r}; models: {', '.join(routes)}")
        session = await self._session(conversation_id)
        if route == session.model:
            return None
        return await session.record(ev.ConfigChanged, option_id="model", value=route)

    async def set_option(
        self, conversation_id: str, option_id: str, value: str | bool
    ) -> LoopEvent | None:
        engine = self.agent.engine
        if isinstance(engine, Settles):  # the far agent's options
            return await engine.set_option(await self._far(conversation_id), option_id, value)
        if option_id != "model":
            raise ValueError(f"there is no config option {option_id!r}; options: model")
        if not isinstance(value, str):
            raise ValueError("config option 'model' takes a model route (a string)")
        return await self.set_model(conversation_id, value)

    async def _far(self, conversation_id: str) -> FarConversation:
        session = await self._session(conversation_id)
        return FarConversation(
            conversation_id=session.id,
            cwd=session.cwd,
            config=dict(session.facts.config),
            mode=session.mode,
            record=session.record,
        )

    async def record(self, conversation_id: str, event: LoopEvent) -> LoopEvent:
        session = await self._session(conversation_id)
        fields = {
            f.name: getattr(event, f.name)
            for f in dataclasses.fields(event)
            if f.name not in _BASE_FIELDS
        }
        return await session.record(type(event), **fields)

    async def events_after(self, conversation_id: str, seq: int = -1) -> Sequence[LoopEvent]:
        session = await self._session(conversation_id)
        if self.agent.shares_store:
            await session.refresh()
        return await events_after(session, seq)

    async def replay_after(self, conversation_id: str, seq: int = -1) -> Sequence[Coalesced]:
        session = await self._session(conversation_id)
        if self.agent.shares_store:
            await session.refresh()
        return await coalesced_after(session, seq)

    async def relay_signals(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        await self.agent.relay_signals(task_status=task_status)

    async def aclose(self) -> None:
        self._held.clear()
        self._attached.clear()
        await self.agent.aclose()


def _conversation(session: Session) -> Conversation:
    return Conversation(
        conversation_id=session.id,
        cwd=session.cwd,
        model=session.model,
        mode=session.mode,
        title=session.facts.title,
        running=session.running or session.facts.running,
        last_seq=session.log.next_seq - 1,
        open_calls=tuple(session.facts.open_calls),
        open_questions=tuple(session.facts.open_questions),
        state=session.facts.state,
    )
