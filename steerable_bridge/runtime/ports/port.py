"""The agent port: the one surface both transports use to reach an agent.

A transport (the ACP agent side, the AG-UI server) holds one `AgentPort` and nothing else
of the runtime's moving parts: it opens (as a user's, when it tells users apart), loads,
forks, lists (one user's), describes, closes and deletes conversations, asks whether one
runs, runs a prompt as a stream of LoopEvents handed to its sink (ending in one
`run_finished` or `run_failed`, which the returned `RunOutcome` carries as `final_event`),
cancels, steers, queues follow-ups, changes a conversation's mode or model, and reads the
events after a seq for replay (exactly, or with each message's deltas coalesced). What a
conversation needs from its transport — how to ask a
person for permission, the client's workspace environment, tools the client brings — is
handed in once, as `Attachments`, when it is opened. A permission asked with no asker is
deferred: the run ends `interrupted` and the next prompt's `TurnInput.resume` answers it;
so is a question (the model's `ask_user`) asked with no questioner (`TurnInput.answers`).
Busy, claims and ownership by another process live behind the port: `prompt` raises
`SessionBusy` (or `SessionOwned`) when a turn already runs, and `reserve` lets a transport
hold a conversation between validating a request and starting its turn. Our runtime
implements it (`conversations.py`, `LocalPort`); the two bridges run behind that same
implementation as turn engines (`turn.TurnEngine`): the ACP client side drives any ACP agent
(`transports/acp/bridge`), the AG-UI client side any AG-UI endpoint (`transports/agui/bridge`),
so busy, claims, the log, replay and traces are one implementation for all three. Plain
values and one Protocol; no behaviour here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus
from pydantic import JsonValue

from steerable_bridge.runtime.events import LoopEvent, QuestionMode
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.runtime.ports.permissions import Asker
from steerable_bridge.runtime.ports.questions import QUESTION_MODES, Questioner
from steerable_bridge.runtime.ports.storage import SessionPage, SessionRecord
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.session_log.replay import Coalesced
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.turns.turn import EventSink, RunOutcome, TurnInput
from steerable_bridge.runtime.values import ContentPart

__all__ = [
    "AgentPort",
    "Attach",
    "Attachments",
    "Coalesced",
    "Conversation",
    "PortInfo",
    "Reservation",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachments:
    """What a conversation borrows from the transport serving it, given once at open."""

    asker: Asker | None = None
    """Asks a person about a tool call (ACP `session/request_permission`); None: permissions
    are deferred to the client's next run (AG-UI interrupts answered through `resume[]`)."""
    questioner: Questioner | None = None
    """Asks a person a question (ACP `elicitation/create`); None: questions are deferred to
    the client's next run (AG-UI interrupts carrying the form's schema, `resume[]`)."""
    questions: bool = True
    """Whether the model is offered `ask_user` at all (False: the client cannot answer,
    e.g. an ACP client that advertised no `elicitation` mode)."""
    question_modes: frozenset[QuestionMode] = QUESTION_MODES
    """The question modes the client shows (ACP `elicitation.form` / `.url`); a url question
    to a client without url mode is asked as a yes/no form."""
    environment: Environment | None = None
    """The client's workspace (ACP `fs/*`, `terminal/*`); None: the agent's own."""
    tools: tuple[Tool, ...] = ()
    """Tools the client brings for the conversation's lifetime (MCP servers, workspace tools)."""


Attach = Callable[[str], Awaitable[Attachments]]
"""Builds a conversation's attachments once its id is known (called by open / load / fork)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """What a transport may know of a conversation, as of the call that returned it."""

    conversation_id: str
    cwd: str
    model: str
    mode: str
    title: str | None = None
    running: bool = False
    """Whether a turn runs in it (here or in another process sharing the store)."""
    last_seq: int = -1
    """The seq of its newest logged event (-1: none yet)."""
    open_calls: tuple[str, ...] = ()
    """Tool calls an earlier run left waiting for the client (frontend tools, approvals)."""
    open_questions: tuple[str, ...] = ()
    """Ids of questions an earlier run left waiting for the client's answer."""
    state: JsonValue = None
    """The shared state (AG-UI `state`): the last snapshot with every later patch applied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PortInfo:
    """What the agent behind the port is and offers, for `initialize` and capabilities."""

    name: str
    version: str
    default_model: str
    models: tuple[str, ...]
    """The routes users may pick from (ACP config option `model`, `/model`)."""
    modes: tuple[tuple[str, str, str], ...]
    """(mode id, name, description) for each mode the agent has."""
    can_load: bool = True
    can_fork: bool = True
    can_list: bool = True
    can_steer: bool = True
    tools: tuple[str, ...] = ()
    """Names of the tools every conversation is offered (a `/health` page lists them so a
    client suggests only what the agent can do); empty when the agent does not say."""


class Reservation(Protocol):
    """A transport's hold on an idle conversation until its turn starts or it lets go."""

    def release(self) -> None:
        """Let go without running a turn (safe to call after the turn started, or twice)."""


class AgentPort(Protocol):
    """An agent, as both transports see it. Errors are the runtime's: `SessionNotFound`,
    `SessionBusy` / `SessionOwned`, `RouteError`, `ProviderError`, `StoreError`."""

    def info(self) -> PortInfo:
        """Name, version, models and modes (cheap: no I/O)."""

    async def model_info(self, route: str) -> ModelInfo:
        """What `route` can take (images, documents) and whether it still needs a key,
        re-reading stored credentials when it does; raises `RouteError`."""

    async def open(
        self,
        cwd: str,
        *,
        conversation_id: str | None = None,
        model: str | None = None,
        attach: Attach | None = None,
        user: str | None = None,
    ) -> Conversation:
        """A new conversation in `cwd` (under `conversation_id` when the client names it),
        stored as created by `user` when the transport tells users apart."""

    async def load(
        self,
        conversation_id: str,
        *,
        cwd: str | None = None,
        attach: Attach | None = None,
        model: str | None = None,
    ) -> Conversation:
        """An existing conversation (from memory or the store; `cwd` replaces its folder,
        `model` the route it falls back to when it never picked one — a command's
        `--model`); raises `SessionNotFound`, or `SessionBusy` when `attach` is given while
        a turn runs."""

    async def fork(
        self, conversation_id: str, cwd: str, *, attach: Attach | None = None
    ) -> Conversation:
        """A new conversation holding a copy of `conversation_id`'s whole visible history;
        raises `RouteError` (`fork_unsupported`) when `info().can_fork` is false."""

    async def list(
        self,
        *,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> SessionPage:
        """Conversations, newest first, a page at a time (only `user`'s, when given)."""

    async def describe(self, conversation_id: str) -> SessionRecord | None:
        """Its stored record (title, times, the user who created it), None when there is
        no such conversation; cheap: reads the record only, never the log."""

    async def close(self, conversation_id: str) -> bool:
        """Cancel its turn and let memory go of it (its log stays); False when not open."""

    async def delete(self, conversation_id: str) -> bool:
        """Close it and remove its log; False when there was no such conversation."""

    async def is_running(self, conversation_id: str) -> bool:
        """Whether a turn runs in it now, here or in another process sharing the store
        (reads no log: cheap enough for every row of a listing)."""

    def reserve(self, conversation_id: str) -> Reservation | None:
        """Hold an idle conversation for the caller's next `prompt` (synchronous, so two
        racing requests never both get it); None when a turn or another hold has it."""

    async def prompt(
        self,
        conversation_id: str,
        turn: TurnInput,
        sink: EventSink,
        *,
        cancel: CancelToken | None = None,
        reservation: Reservation | None = None,
    ) -> RunOutcome:
        """Run one turn: every LoopEvent goes to `sink` as it is logged, the last being the
        run's `run_finished` / `run_failed` (also `RunOutcome.final_event`; `notice` says
        why a `compact` turn folded nothing, when it did not). Raises `SessionBusy` /
        `SessionOwned` / `RouteError` before anything is logged."""

    async def cancel(self, conversation_id: str, reason: str) -> bool:
        """Cancel its running turn, wherever it runs; False when none runs."""

    async def steer(
        self, conversation_id: str, content: tuple[ContentPart, ...], message_id: str | None
    ) -> bool:
        """Add a message to the running turn at its next step; False when none runs."""

    async def follow_up(
        self, conversation_id: str, content: tuple[ContentPart, ...], message_id: str | None
    ) -> bool:
        """Queue a message for when the running turn would end; False when none runs."""

    async def request_compact(self, conversation_id: str) -> bool:
        """Compact the running turn's context at its next step boundary; False when no turn
        runs here (then prompt with `TurnInput(compact=True)`)."""

    async def set_mode(self, conversation_id: str, mode_id: str) -> LoopEvent | None:
        """Switch mode; the logged `mode_changed` (None when it already was that mode).
        Raises `ValueError` naming the modes for an unknown one."""

    async def set_model(self, conversation_id: str, route: str) -> LoopEvent | None:
        """Switch model; the logged `config_changed` (None when unchanged). Raises
        `ValueError` naming the models for an unknown one."""

    async def set_option(
        self, conversation_id: str, option_id: str, value: str | bool
    ) -> LoopEvent | None:
        """Set a config option (`model`, or a bridged agent's own); the logged
        `config_changed` (None when unchanged). Raises `ValueError` naming the options, or
        the option's values, for an unknown one."""

    async def record(self, conversation_id: str, event: LoopEvent) -> LoopEvent:
        """Log a conversation-level event outside any turn (the transport's command list,
        a user message that arrived with a request). The caller builds `event` with any
        session id, run id, seq and ts (e.g. "", "", -1, 0): the port stamps them and
        returns the event as logged."""

    async def events_after(self, conversation_id: str, seq: int = -1) -> Sequence[LoopEvent]:
        """Its visible events after `seq`, oldest first (the whole conversation, compacted
        or not, for `seq` -1), exactly as logged: lossless replay, resume from an event id,
        catching up with other workers."""

    async def replay_after(self, conversation_id: str, seq: int = -1) -> Sequence[Coalesced]:
        """`replay.coalesce_deltas(await events_after(conversation_id, seq))`: the same
        events with each run of one message's streamed deltas as one (`Coalesced.last_seq`
        is the seq of the last it stands for: the cursor to read on from). What a history
        snapshot or a replay that does not keep chunk boundaries reads: it costs one event
        per message, not one per token."""

    async def relay_signals(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Carry what other processes sharing the agent's store ask of the turns this one
        runs (cancel, steer, follow-up), for as long as the transport serves: run it in a
        task group (`start` returns once it listens) and cancel it at shutdown. Returns at
        once, after `task_status.started()`, when there is nothing to relay."""

    async def aclose(self) -> None:
        """Shut down: cancel every running turn and release what the agent holds."""
