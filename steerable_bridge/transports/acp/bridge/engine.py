"""`AcpBridge`: a turn engine that runs each of our turns as prompts of a child ACP agent.

Plugged into our own `Agent(engine=bridge)`, it makes sessions, the log, claims, busy,
cancel, steering, replay, `sessions show`, traces and metrics exactly the native ones, and
the AG-UI server serves it unchanged. One `ChildAgent` process per bridge (`child.py`),
restarted when it dies; `running()` owns the task group everything of the bridge lives in
(the child's supervisor, prompts in flight, terminals) and cancels it on exit.

Our conversation ↔ the child's session: the child session id is logged in the
conversation as `config_changed` with option id `acp.session` (`SESSION_OPTION`), so it
survives a restart of `serve`. A conversation first used by this start of the child is
reopened with `session/resume` when the agent advertises it, else `session/load` (whose
replayed history is not recorded again), else — or when that fails — a new child session,
said in the log with a `hook_action` (`acp-bridge` / `new_agent_session`).

What the port says and changes for the child (`runtime/ports/far.py`): `describe` (a thread goes
on after a restart only when the agent loads or resumes; no fork, which would share the
child's session; the agent's own modes), `set_mode` / `set_option` (`session/set_mode`,
`session/set_config_option` on the conversation's child session, opened first when it has
none, refused with a `ValueError` naming what the agent has), and `list_far` (a page of the
agent's `session/list`, bounded in time and size): a conversation opened under the id of a
session listed so is that session, reopened, instead of a new one — its earlier turns stay
with the agent (which remembers them) and are not copied into our log.

A child prompt may span two of our runs: when the agent asks permission and our policy
defers (AG-UI), the run ends `interrupted` and the prompt is *parked* — its stream keeps
filling, the agent's request stays unanswered (the client bounds that wait) — until the next
run's `resume` answers it (`turn.py`). Every prompt runs under `prompt_timeout_s`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
from acp import RequestError
from acp import schema as acp
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.far import FarConversation, FarPage
from steerable_bridge.runtime.ports.port import PortInfo
from steerable_bridge.runtime.ports.storage import SessionRecord
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnContext, TurnInput
from steerable_bridge.transports.acp.bridge.child import AgentUnavailable, ChildAgent, Live
from steerable_bridge.transports.acp.bridge.client import (
    Asked,
    BridgeClient,
    ChildSession,
    Item,
    PromptDone,
    PromptFailed,
    Questioned,
)
from steerable_bridge.transports.acp.bridge.mapping import (
    OPTION_PREFIX,
    UpdateMapper,
    config_options,
)
from steerable_bridge.transports.acp.bridge.route import ROUTE_PROVIDER
from steerable_bridge.transports.acp.bridge.workspace import ChildWorkspace

__all__ = ["SESSION_OPTION", "AcpBridge", "Parked", "Prompt"]

log = logging.getLogger("steerable_bridge.acp.bridge")

SESSION_OPTION = "acp.session"
"""The `config_changed` option id under which a conversation logs its child session id."""

_CURRENT = (acp.AvailableCommandsUpdate, acp.CurrentModeUpdate, acp.ConfigOptionUpdate)
"""What a `session/load` replay says that still holds now (not its old plans or titles)."""

BRIDGE_HOOK = "acp-bridge"
"""The hook name of the bridge's own notes in the log (`hook_action`)."""

Emit = Callable[..., Awaitable[Any]]
"""`emit(EventClass, **fields)`: log an event in our conversation."""
T = TypeVar("T")

LIST_TIMEOUT_S = 10.0
"""How long the agent's `session/list` may take before the listing goes on without it."""
FAR_PAGE = 200
"""The most sessions taken from one page of the agent's `session/list`."""
LISTED_KEPT = 4096

PROMPT_TIMEOUT_S = 3600.0
REQUEST_TIMEOUT_S = 120.0
"""How long `session/new`, `load` and `resume` may take."""


@dataclass(slots=True, eq=False)
class Prompt:
    """One `session/prompt` in flight: where its updates arrive and how they map."""

    live: Live
    child: ChildSession
    receive: MemoryObjectReceiveStream[Item]
    mapper: UpdateMapper


@dataclass(slots=True, eq=False)
class Parked:
    """A prompt waiting for our next run to answer the agent's permission request, or its
    question (`question` set, with the `question_id` the interrupt carries)."""

    prompt: Prompt
    asked: Asked | None
    call_id: str
    tool_name: str
    question: Questioned | None = None
    question_id: str = ""


class AcpBridge:
    """The turn engine of `serve --acp-agent` (see the module docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        environment: Environment | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        prompt_timeout_s: float = PROMPT_TIMEOUT_S,
        cancel_grace_s: float = 10.0,
        name: str | None = None,
    ) -> None:
        self.workspace = ChildWorkspace(environment, cwd)
        self.client = BridgeClient(self.workspace)
        self.child = ChildAgent(argv, client=self.client, cwd=cwd, env=env, name=name)
        self.prompt_timeout_s = prompt_timeout_s
        self.cancel_grace_s = cancel_grace_s
        self.parked: dict[str, Parked] = {}
        """Our conversation id → its prompt waiting for a permission answer."""
        self.opened: dict[str, tuple[str, int]] = {}
        """Our conversation id → (child session id, the child incarnation it is open in)."""
        self.listed: OrderedDict[str, str] = OrderedDict()
        """Sessions of the agent's own it listed (id → cwd): a thread of that id continues
        one (the newest `LISTED_KEPT`)."""
        self.modes_seen: acp.SessionModeState | None = None
        """The modes the agent's last opened session offered (what `describe` lists)."""
        self._tasks: TaskGroup | None = None

    @property
    def name(self) -> str:
        return self.child.name

    @asynccontextmanager
    async def running(self) -> AsyncIterator[AcpBridge]:
        """Run the child agent (and everything the bridge starts) until the block ends."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            self.workspace.bind(tasks)
            await tasks.start(self.child.supervise)
            try:
                yield self
            finally:
                self._tasks = None
                for parked in self.parked.values():
                    if parked.asked is not None:
                        parked.asked.reply(None)
                    if parked.question is not None:
                        parked.question.reply(None)
                self.parked.clear()
                self.workspace.aclose()
                with anyio.move_on_after(10, shield=True):
                    await self.child.stop()
                tasks.cancel_scope.cancel()

    async def __call__(self, ctx: TurnContext, turn: TurnInput) -> RunOutcome:
        from steerable_bridge.transports.acp.bridge.turn import BridgeTurn

        return await BridgeTurn(self, ctx, turn).run()

    # -- child sessions ---------------------------------------------------------------------

    async def reopen(self, live: Live, session_id: str, cwd: str) -> str | None:
        """Continue child session `session_id` in this start of the agent; None when done,
        else why it could not be."""
        if not (live.can_resume or live.can_load):
            return "it offers neither session/resume nor session/load"
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                child = self.client.session(session_id)
                reply: acp.ResumeSessionResponse | acp.LoadSessionResponse | None
                if live.can_resume:
                    reply = await live.conn.resume_session(session_id=session_id, cwd=cwd)
                else:
                    reply = await live.conn.load_session(
                        cwd=cwd, session_id=session_id, mcp_servers=[]
                    )  # the replay is already logged:
                    child.between = [u for u in child.between if isinstance(u, _CURRENT)]
                if reply is not None:
                    child.modes = reply.modes or child.modes
                    self.modes_seen = reply.modes or self.modes_seen
                    child.options = reply.config_options or child.options
        except RequestError as error:
            return f"it answered {error} ({error.code})"
        except TimeoutError:
            return f"it did not answer within {REQUEST_TIMEOUT_S:g} s"
        return None

    async def session_for(
        self, live: Live, conversation_id: str, cwd: str, stored: str | None, emit: Emit
    ) -> str:
        """The child session of our conversation in this start of the agent: the one it
        already has open, the stored one reopened — or, for a conversation opened under the
        id of a session the agent listed, that session — or a new one (logged through
        `emit`, with a `hook_action` when a stored one could not be continued)."""
        opened = self.opened.get(conversation_id)
        if opened is not None and opened[1] == live.incarnation:
            return opened[0]
        why = None
        if stored is not None:
            why = await self.reopen(live, stored, cwd)
            if why is None:
                self.opened[conversation_id] = (stored, live.incarnation)
                return stored
        elif (
            conversation_id in self.listed  # a session of the agent's own, listed to a user
            and await self.reopen(live, conversation_id, self.listed[conversation_id]) is None
        ):
            await emit(ev.ConfigChanged, option_id=SESSION_OPTION, value=conversation_id)
            self.opened[conversation_id] = (conversation_id, live.incarnation)
            return conversation_id
        with anyio.fail_after(REQUEST_TIMEOUT_S):
            created = await live.conn.new_session(cwd=cwd, mcp_servers=[])
        child = self.client.session(created.session_id)
        child.modes, child.options = created.modes, created.config_options
        self.modes_seen = created.modes or self.modes_seen
        await emit(ev.ConfigChanged, option_id=SESSION_OPTION, value=created.session_id)
        if stored is not None:
            detail = (
                f"the ACP agent could not continue its session {stored} ({why}), so this"
                f" conversation goes on in its new session {created.session_id}, which does"
                " not remember the earlier turns"
            )
            log.warning("conversation %s: %s", conversation_id, detail)
            await emit(ev.HookAction, hook=BRIDGE_HOOK, action="new_agent_session", detail=detail)
        if created.modes is not None:
            await emit(ev.ModeChanged, mode_id=created.modes.current_mode_id)
        for cls, fields in config_options(created.config_options):
            await emit(cls, **fields)
        self.opened[conversation_id] = (created.session_id, live.incarnation)
        return created.session_id

    # -- what the port may say and change (`runtime/ports/far.py`) --------------------------------

    def describe(self, info: PortInfo) -> PortInfo:
        """Our log lists, replays and steers every conversation (steering the agent does
        not take mid-turn is its next prompt); a thread goes on in the same child session
        after a restart only when the agent can load or resume one; forking would share
        the child's session, so it is not offered. The modes are the agent's own, as its
        last session reported them."""
        init = self.child.init
        caps = init.agent_capabilities if init is not None else None
        continues = caps is None or bool(
            caps.load_session or (caps.session_capabilities and caps.session_capabilities.resume)
        )
        modes = self.modes_seen.available_modes if self.modes_seen is not None else ()
        offered = tuple((m.id, m.name, m.description or "") for m in modes)
        return replace(info, can_load=continues, can_fork=False, modes=offered)

    async def list_far(self, *, cwd: str | None, cursor: str | None) -> FarPage | None:
        """A page of the agent's `session/list` (when it offers one, within
        `LIST_TIMEOUT_S`); the sessions it names may be continued as threads of that id."""
        init = self.child.init
        caps = init.agent_capabilities if init is not None else None
        if caps is None or caps.session_capabilities is None or not caps.session_capabilities.list:
            return None
        try:
            live = await self.child.ready()
            with anyio.fail_after(LIST_TIMEOUT_S):
                reply = await live.conn.list_sessions(cwd=cwd, cursor=cursor)
        except (AgentUnavailable, RequestError, TimeoutError, ConnectionError) as error:
            log.info("session/list of the ACP agent `%s` failed: %s", self.name, error)
            return None
        records = []
        for info in reply.sessions[:FAR_PAGE]:
            stamp = _ms(info.updated_at)
            records.append(
                SessionRecord(
                    session_id=info.session_id, cwd=info.cwd, created_at=stamp,
                    updated_at=stamp, title=info.title, model=f"{ROUTE_PROVIDER}:{self.name}",
                )
            )  # fmt: skip
            self.listed[info.session_id] = info.cwd
            self.listed.move_to_end(info.session_id)
        while len(self.listed) > LISTED_KEPT:
            self.listed.popitem(last=False)
        return FarPage(records=tuple(records), next_cursor=reply.next_cursor)

    def far_id(self, config: Mapping[str, str]) -> str | None:
        return config.get(SESSION_OPTION)

    def far_ids(self) -> set[str]:
        return {child for child, _ in self.opened.values()}

    async def _settings_session(self, conversation: FarConversation) -> tuple[Live, ChildSession]:
        """The conversation's child session for a settings change (opened when it has none
        yet); a child that is not running raises `RouteError` (the route cannot be used)."""
        try:
            live = await self.child.ready()
        except AgentUnavailable as error:
            raise RouteError(error.code, error.message) from None
        session_id = await self.session_for(
            live,
            conversation.conversation_id,
            conversation.cwd,
            conversation.config.get(SESSION_OPTION),
            conversation.record,
        )
        return live, self.client.session(session_id)

    async def set_mode(self, conversation: FarConversation, mode_id: str) -> LoopEvent | None:
        live, child = await self._settings_session(conversation)
        offered = [m.id for m in child.modes.available_modes] if child.modes else []
        if mode_id not in offered:
            has = f"pick one of its modes: {', '.join(offered)}" if offered else "it has none"
            raise ValueError(f"the ACP agent `{self.name}` has no mode {mode_id!r}; {has}")
        if child.modes is not None and child.modes.current_mode_id == mode_id:
            return None
        await self._ask(live.conn.set_session_mode(session_id=child.session_id, mode_id=mode_id))
        if child.modes is not None:
            child.modes = child.modes.model_copy(update={"current_mode_id": mode_id})
        return await conversation.record(ev.ModeChanged, mode_id=mode_id)

    async def set_option(
        self, conversation: FarConversation, option_id: str, value: Any
    ) -> LoopEvent | None:
        live, child = await self._settings_session(conversation)
        roots = (getattr(o, "root", o) for o in child.options or ())
        options: dict[str, Any] = {o.id: o for o in roots}
        option = options.get(option_id)
        if option is None:
            has = f"its options: {', '.join(options)}" if options else "it has none"
            has += " (send only options it offers)"
            raise ValueError(
                f"the ACP agent `{self.name}` has no config option {option_id!r}; {has}"
            )
        if isinstance(option, acp.SessionConfigOptionBoolean):
            if not isinstance(value, bool):
                raise ValueError(f"config option {option_id!r} takes true or false; send one")
        else:
            values = _select_values(option)
            if value not in values:
                raise ValueError(
                    f"config option {option_id!r} of the ACP agent `{self.name}` has no value"
                    f" {value!r}; pick one of: {', '.join(values)}"
                )
        if option.current_value == value:
            return None
        reply = await self._ask(
            live.conn.set_config_option(
                config_id=option_id, session_id=child.session_id, value=value
            )
        )
        child.options = reply.config_options or child.options
        last: LoopEvent | None = None
        for cls, fields in config_options(child.options):
            if fields["option_id"] == OPTION_PREFIX + option_id:
                last = await conversation.record(cls, **fields)
        return last

    async def _ask(self, request: Awaitable[T]) -> T:
        """A settings request to the agent, bounded; its refusal as a `ValueError`."""
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                return await request
        except RequestError as error:
            raise ValueError(
                f"the ACP agent `{self.name}` refused it: {error}{_data(error)}"
            ) from None
        except TimeoutError:
            raise ValueError(
                f"the ACP agent `{self.name}` did not answer within {REQUEST_TIMEOUT_S:g} s; retry"
            ) from None

    # -- prompts ----------------------------------------------------------------------------

    def start(
        self, live: Live, child: ChildSession, blocks: list[object], mapper: UpdateMapper
    ) -> Prompt:
        """Send `session/prompt` in the bridge's task group; its end arrives in the stream."""
        if self._tasks is None:
            raise AgentUnavailable(
                "acp_agent_unavailable", "the bridge is not running (the server is stopping)"
            )
        receive = child.open_prompt()
        assert child.send is not None
        self._tasks.start_soon(self._send, live, child.session_id, blocks, child.send)
        return Prompt(live=live, child=child, receive=receive, mapper=mapper)

    async def _send(
        self,
        live: Live,
        session_id: str,
        blocks: list[object],
        stream: MemoryObjectSendStream[Item],
    ) -> None:
        end: PromptDone | PromptFailed
        try:
            with anyio.fail_after(self.prompt_timeout_s):
                response = await live.conn.prompt(session_id=session_id, prompt=blocks)  # type: ignore[arg-type]
            end = PromptDone(response)
        except TimeoutError:
            await self.cancel_child(live, session_id)
            end = PromptFailed(
                "acp_agent_timeout",
                f"the ACP agent did not finish the prompt within {self.prompt_timeout_s:g} s;"
                " it was cancelled — send a shorter request or retry",
            )
        except RequestError as error:
            data = error.data if isinstance(error.data, dict) else {}
            code = data.get("code") if isinstance(data.get("code"), str) else None
            end = PromptFailed(
                code or "acp_agent_error",
                f"the ACP agent answered the prompt with an error: {error} (JSON-RPC"
                f" {error.code}{_data(error)}); fix what it says and send the message again",
            )
        except (ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            note = await live.exit_note()
            end = PromptFailed(
                "acp_agent_exited",
                f"the ACP agent `{self.name}` exited during this run{note}; it is being"
                " restarted — send the message again to continue",
            )
        except Exception as error:
            log.exception("session/prompt to the ACP agent failed")
            end = PromptFailed("internal_error", f"{type(error).__name__}: {error}")
        try:
            stream.send_nowait(end)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("a prompt ended after its run let go of it")

    async def cancel_child(self, live: Live, session_id: str) -> None:
        """Send `session/cancel` (bounded; a dead agent needs none)."""
        try:
            with anyio.fail_after(5):
                await live.conn.cancel(session_id=session_id)
        except Exception as error:
            log.info("session/cancel to the ACP agent failed: %s", error)


def _ms(stamp: str | None) -> int:
    """An ISO 8601 time (ACP `updatedAt`) in ms since the epoch; 0 when absent or unreadable."""
    if not stamp:
        return 0
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _select_values(option: acp.SessionConfigOptionSelect) -> list[str]:
    values: list[str] = []
    for entry in option.options:
        grouped = getattr(entry, "options", None)
        values += [o.value for o in grouped] if grouped is not None else [entry.value]
    return values


def _data(error: RequestError) -> str:
    data = error.data
    if isinstance(data, dict) and data.get("details"):
        return f": {data['details']}"
    if isinstance(data, dict) and data.get("message"):
        return f": {data['message']}"
    return ""
