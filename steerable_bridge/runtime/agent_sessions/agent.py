"""The agent: sessions, their store, the model router, and the tool and prompt registries.

Transports hold one `Agent` and ask it for sessions: `new_session(cwd)`,
`load_session(id)` (from memory, or rebuilt from the store's tail — closing a turn a crash
left open, unless a live process still runs it), `list_sessions`, `close_session`,
`delete_session` (which also removes the tool outputs its spill kept). The CLI builds it
with the adapters the user configured; the runtime never imports an adapter itself.
`steer`, `follow_up` and `cancel` reach a session's running turn in this process, or — when
another process sharing the store runs it — through the store's signals (`signals.py`),
which `relay_signals()` (run by the transport for as long as it serves) applies to the
turns this process runs. `aclose()` shuts it down: running turns are cancelled, the router
closes its providers (their pooled HTTP clients) and the store its connections.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge.runtime.agent_sessions.agent_config import AgentConfig, new_id
from steerable_bridge.runtime.agent_sessions.idle import IdleCache
from steerable_bridge.runtime.agent_sessions.registry import PromptSection, Registry, Scope
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.agent_sessions.signals import (
    SessionSignal,
    listen_signals,
    publish_signal,
)
from steerable_bridge.runtime.model_context.tokens import TokenCalibration
from steerable_bridge.runtime.ports.observe import Observer
from steerable_bridge.runtime.ports.storage import (
    SessionNotFound,
    SessionOwned,
    SessionPage,
    SessionRecord,
    SessionStore,
    claim_session,
    forget_cached,
    read_tail_entries,
    session_owner,
)
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.session_log.log import SessionLog, now_ms
from steerable_bridge.runtime.tool_calls.approvals import ApprovalMemory
from steerable_bridge.runtime.tool_calls.bounding import Spill
from steerable_bridge.runtime.turns.hooks import Hook
from steerable_bridge.runtime.turns.turn import TurnEngine
from steerable_bridge.runtime.values import ContentPart

log = logging.getLogger(__name__)

__all__ = ["Agent", "AgentConfig", "new_id"]

IDENTITY = (
    "You are steerable-bridge, a helpful assistant that works inside the user's editor or web"
    " app. Answer plainly. Use the tools you are given when they help, and say what you did."
)


class Agent:
    """Creates, loads and keeps sessions; owns the registries, the router and the
    process's token calibration (one per agent, shared by its sessions)."""

    def __init__(
        self,
        *,
        router: ModelRouter,
        store: SessionStore,
        config: AgentConfig,
        observers: Sequence[Observer] = (),
        approvals: ApprovalMemory | None = None,
        engine: TurnEngine | None = None,
    ) -> None:
        self.router = router
        self.engine = engine
        """Runs each turn (None: our model loop, `loop.run_turn`); a bridge passes its own."""
        self.store = store
        self.config = config
        self.approvals = approvals
        """Remembered "always" answers per project, kept across sessions (or None)."""
        self.observers: tuple[Observer, ...] = tuple(observers)
        """Watch every turn (tracing, metrics; see `observe.py`)."""
        self.tools: Registry[Tool] = Registry()
        self.prompts: Registry[PromptSection] = Registry()
        self.prompts.register(PromptSection(name="identity", text=IDENTITY))
        self.hooks: Registry[Hook] = Registry()
        self.calibration = TokenCalibration()
        self.notes: Callable[[str], Awaitable[str]] | None = None
        """Reads a cwd's project notes (AGENTS.md and the like) for the system prompt, once
        per session as it is made or loaded; the CLI sets it, tests may leave it None."""
        self.spill: Spill | None = None
        """Keeps the full text of tool results cut to `config.output_limits` (the CLI sets a
        file store under the state directory); None: the cut middle is not kept."""
        self._sessions: IdleCache[str, Session] = IdleCache(
            capacity=config.max_sessions, ttl_s=config.session_ttl_s
        )

    def scope_of(self, session: Session) -> Scope:
        return (session.id,)

    def system_prompt(self, session: Session) -> str:
        sections = self.prompts.snapshot(self.scope_of(session))
        text = "\n\n".join(section.text for section in sections)
        return f"{text}\n\n{session.notes}" if session.notes else text

    async def _read_notes(self, session: Session) -> None:
        if self.notes is not None:
            session.notes = await self.notes(session.cwd)

    def get(self, session_id: str) -> Session | None:
        """The session if this process has it open."""
        return self._sessions.get(session_id)

    def keep(self, session: Session) -> None:
        """Hold `session` in memory (again: a session starting a turn calls this), forgetting
        idle ones over the cap or past the TTL; forgotten ones reload from the store."""
        self._sessions.put(session.id, session)
        for gone in self._sessions.sweep(_idle):
            forget_cached(self.store, gone.id)

    def forget(self, session_id: str) -> bool:
        """Drop an idle session from memory now (it reloads from the store when used again);
        False when it is not held or not idle. For sessions no client is watching any more."""
        session = self._sessions.peek(session_id)
        if session is None or not _idle(session):
            return False
        self._sessions.pop(session_id)
        forget_cached(self.store, session_id)
        return True

    @property
    def sessions_in_memory(self) -> int:
        """How many sessions are held in memory now (bounded by `max_sessions`, shed when
        idle past `session_ttl_s`): what shows that eviction and `forget` free them."""
        return len(self._sessions)

    async def new_session(
        self,
        cwd: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        user: str | None = None,
    ) -> Session:
        sid = session_id or new_id("sess")
        now = now_ms()
        await self.store.create(
            SessionRecord(
                session_id=sid,
                cwd=cwd,
                created_at=now,
                updated_at=now,
                model=model or self.config.model,
                user=user,
            )
        )
        session = Session(
            self, SessionLog(sid, store=self.store), cwd=cwd, model=model or self.config.model
        )
        await self._read_notes(session)
        self.keep(session)
        return session

    async def load_session(self, session_id: str) -> Session:
        """The open session, or one rebuilt from the store. Raises SessionNotFound."""
        session = self._sessions.get(session_id)
        if session is not None:
            return session
        record = await self.store.get(session_id)
        if record is None:
            raise SessionNotFound(session_id)
        entries = await read_tail_entries(self.store, session_id)
        log = SessionLog(session_id, entries, store=self.store)
        session = Session(self, log, cwd=record.cwd, model=record.model or self.config.model)
        await self._read_notes(session)
        if session.facts.running:
            # Open run: either a live process is running it (leave it alone; a later prompt
            # catches up) or its process died (close it, holding the claim).
            with contextlib.suppress(SessionOwned):
                async with claim_session(self.store, session_id):
                    await session.catch_up()
        self.keep(session)
        return session

    async def list_sessions(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        if user is None:  # a store of another make may not tell users apart
            return await self.store.list(cwd=cwd, cursor=cursor, limit=limit)
        return await self.store.list(cwd=cwd, cursor=cursor, limit=limit, user=user)

    async def session_record(self, session_id: str) -> SessionRecord | None:
        """The session's stored record (title, times, user), or None when there is none."""
        return await self.store.get(session_id)

    async def close_session(self, session_id: str) -> bool:
        """Cancel its turn and forget it in memory (the log stays in the store)."""
        session = self._sessions.pop(session_id)
        if session is None:
            return False
        session.closed = True
        session.cancel("the session was closed")
        await session.log.commit()
        forget_cached(self.store, session_id)
        return True

    async def delete_session(self, session_id: str) -> bool:
        """Forget the session, remove its log from the store and the full tool outputs its
        spill kept; False when the store had no such session."""
        await self.close_session(session_id)
        deleted = await self.store.delete(session_id)
        if deleted and self.spill is not None:
            try:
                await self.spill.forget(session_id)
            except OSError as err:
                log.warning("session %s deleted, but its spilled outputs stay: %s", session_id, err)
        return deleted

    # -- reaching a running turn, here or in another process ---------------------------------

    async def steer(
        self, session_id: str, content: tuple[ContentPart, ...], message_id: str | None = None
    ) -> bool:
        """Add a message to the running turn at its next step boundary (logged under
        `message_id` when the client named it, whichever process runs the turn); False when
        no process runs a turn in the session."""
        return await self._signal(
            SessionSignal(
                session_id=session_id, action="steer", content=content, message_id=message_id
            )
        )

    async def follow_up(
        self, session_id: str, content: tuple[ContentPart, ...], message_id: str | None = None
    ) -> bool:
        """Queue a message for when the running turn would end; False when none runs."""
        return await self._signal(
            SessionSignal(
                session_id=session_id, action="follow_up", content=content, message_id=message_id
            )
        )

    async def cancel(self, session_id: str, reason: str = "cancelled by the client") -> bool:
        """Cancel the running turn wherever it runs; False when none runs."""
        return await self._signal(
            SessionSignal(session_id=session_id, action="cancel", reason=reason)
        )

    @property
    def shares_store(self) -> bool:
        """Whether other processes may use this store too (it carries signals between them),
        so what this process holds in memory can fall behind it."""
        return hasattr(self.store, "publish")

    async def owner_elsewhere(self, session_id: str) -> str | None:
        """The other process running a turn in the session (as the store names it), or None
        when none does — this process's own turns do not count."""
        session = self._sessions.peek(session_id)
        if session is not None and session.running:
            return None
        return await session_owner(self.store, session_id)

    async def _signal(self, signal: SessionSignal) -> bool:
        if self.apply_signal(signal):
            return True
        if await session_owner(self.store, signal.session_id) is None:
            return False
        return await publish_signal(self.store, signal)

    def apply_signal(self, signal: SessionSignal) -> bool:
        """Apply a signal to the session's turn if this process runs it."""
        session = self._sessions.peek(signal.session_id)
        if session is None or not session.running:
            return False
        if signal.action == "cancel":
            return session.cancel(signal.reason or "cancelled by another process")
        if signal.action == "steer":
            return session.steer(signal.content, signal.message_id)
        return session.follow_up(signal.content, signal.message_id)

    async def relay_signals(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Apply the signals other processes publish to the turns this one runs, until
        cancelled (start it with `task_group.start` to know it listens); returns at once
        when the store carries none (a store only this process uses)."""
        await listen_signals(self.store, self.apply_signal, task_status=task_status)

    async def aclose(self) -> None:
        """Shut down: close every open session, then the providers, the store and the
        observers that have an `aclose`."""
        with anyio.CancelScope(shield=True):
            for session_id in self._sessions.key_list():
                await self.close_session(session_id)
            await self.router.aclose()
            close = getattr(self.store, "aclose", None)
            if close is not None:
                await close()
            for observer in self.observers:  # tracing exports what it still buffers
                close = getattr(observer, "aclose", None)
                if close is not None:
                    await close()


def _idle(session: Session) -> bool:
    """A session memory may forget: no turn running and nothing waiting to be saved."""
    return not session.running and not session.log.uncommitted
