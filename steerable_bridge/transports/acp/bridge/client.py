"""The client side the bridged agent talks to: its updates, permission asks, files, terminals.

`BridgeClient` implements the SDK's `Client` protocol for the one child agent. It never does
the turn's work itself: each `session/update` is handed, in arrival order and without
awaiting anything first, to the `ChildSession` its session id names — into the stream of the
prompt running there, or, between prompts, kept if it is about the session (commands, mode,
config options, title, plan, usage) and dropped otherwise (a `session/load` replaying
history we already logged). A `session/request_permission` goes into the same stream as an
`Asked`, and its reply waits (bounded) until the engine answers it — possibly in the next
AG-UI run; with no prompt to take it, it is answered `cancelled` at once. An
`elicitation/create` (a question, tied to a session) goes the same way as a `Questioned`,
answered accept / decline / cancel; one tied to no session (request scope) is cancelled at
once, since no run is there to carry it. `elicitation/complete` for a url question goes
into the stream of the session that asked it as a `Completed` (between prompts it is only
logged: that prompt's run is over). `fs/*` and
`terminal/*` go to the `ChildWorkspace`; any other request (a vendor extension) gets
"method not found" at once, and other notifications are logged and ignored.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp import RequestError
from acp import schema as acp
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from steerable_bridge.runtime.ports.questions import QuestionAnswer
from steerable_bridge.transports.acp.bridge.compaction import ChildCompaction
from steerable_bridge.transports.acp.bridge.mapping import session_level
from steerable_bridge.transports.acp.bridge.workspace import ChildWorkspace

__all__ = [
    "Asked",
    "BridgeClient",
    "ChildSession",
    "Completed",
    "Item",
    "PromptDone",
    "PromptFailed",
    "Questioned",
]

log = logging.getLogger("steerable_bridge.acp.bridge")

BETWEEN_PROMPTS = 64
"""Session-level updates kept between prompts (the oldest go first beyond it)."""

URL_QUESTIONS = 256
"""Url questions remembered for their completion (the oldest are forgotten beyond it)."""


@dataclass(slots=True, eq=False)
class Asked:
    """A permission request of the agent, waiting for the engine's answer."""

    tool_call: acp.ToolCallUpdate
    options: list[acp.PermissionOption]
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: acp.RequestPermissionResponse | None = None

    def reply(self, option_id: str | None) -> None:
        """Answer with `option_id`, or `cancelled` when None (only the first answer counts)."""
        if self.answered.is_set():
            return
        outcome: acp.AllowedOutcome | acp.DeniedOutcome = (
            acp.DeniedOutcome(outcome="cancelled")
            if option_id is None
            else acp.AllowedOutcome(outcome="selected", option_id=option_id)
        )
        self.answer = acp.RequestPermissionResponse(outcome=outcome)
        self.answered.set()


@dataclass(slots=True, eq=False)
class Questioned:
    """A question of the agent (`elicitation/create`), waiting for the engine's answer."""

    message: str
    mode: Any
    """The SDK's form / url mode model (session scoped: `session_id`, `tool_call_id`)."""
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None

    def reply(self, answer: QuestionAnswer | None) -> None:
        """Answer (None: cancel); only the first answer counts."""
        if self.answered.is_set():
            return
        if answer is not None and answer.action == "accept":
            content = json.loads(answer.content_json) if answer.content_json else None
            self.answer = acp.AcceptElicitationResponse(action="accept", content=content)
        elif answer is not None and answer.action == "decline":
            self.answer = acp.DeclineElicitationResponse(action="decline")
        else:
            self.answer = acp.CancelElicitationResponse(action="cancel")
        self.answered.set()


@dataclass(frozen=True, slots=True)
class Completed:
    """The agent says a url question of this session is over (`elicitation/complete`)."""

    elicitation_id: str


@dataclass(frozen=True, slots=True)
class PromptDone:
    """The agent answered `session/prompt`."""

    response: acp.PromptResponse


@dataclass(frozen=True, slots=True)
class PromptFailed:
    """`session/prompt` failed: a JSON-RPC error, or the agent process went away."""

    code: str
    message: str


Item = Any
"""What a prompt's stream carries: a `session/update` payload, `Asked`, `Questioned`,
`Completed`, `PromptDone` or `PromptFailed`."""


class ChildSession:
    """One session of the child agent: where its updates go."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.send: MemoryObjectSendStream[Item] | None = None
        self.between: list[Any] = []
        self.modes: acp.SessionModeState | None = None
        """Its modes as the agent last said (`session/new`, load / resume, mode updates)."""
        self.options: list[Any] | None = None
        """Its config options as the agent last listed them."""
        self.url_questions: dict[str, tuple[str, str | None]] = {}
        """elicitationId of each url question it asked → (our question id, its call id)."""

    def note(self, update: Any) -> None:
        """Keep what a session-level update says about the session's modes and options."""
        if isinstance(update, acp.CurrentModeUpdate) and self.modes is not None:
            self.modes = self.modes.model_copy(update={"current_mode_id": update.current_mode_id})
        elif isinstance(update, acp.ConfigOptionUpdate):
            self.options = list(update.config_options)

    def remember_url(self, elicitation_id: str, question_id: str, call_id: str | None) -> None:
        """Keep which question a url elicitation is, for its completion (bounded)."""
        self.url_questions[elicitation_id] = (question_id, call_id)
        for old in list(self.url_questions)[:-URL_QUESTIONS]:
            del self.url_questions[old]

    def open_prompt(self) -> MemoryObjectReceiveStream[Item]:
        """A new stream for a prompt (the previous one, if any, is closed)."""
        self.close_prompt()
        send, receive = anyio.create_memory_object_stream[Item](math.inf)
        self.send = send
        return receive

    def close_prompt(self) -> None:
        if self.send is not None:
            self.send.close()
            self.send = None

    def deliver(self, item: Item) -> bool:
        """Into the running prompt's stream; False when none takes it."""
        if self.send is None:
            return False
        try:
            self.send.send_nowait(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.send = None
            return False
        return True

    def take_between(self) -> list[Any]:
        kept, self.between = self.between, []
        return kept


class BridgeClient:
    """The SDK `Client` of the bridge (see the module docstring)."""

    def __init__(self, workspace: ChildWorkspace, *, answer_timeout_s: float = 900.0) -> None:
        self.workspace = workspace
        self.answer_timeout_s = answer_timeout_s
        self.sessions: dict[str, ChildSession] = {}
        self.url_sessions: dict[str, str] = {}
        """elicitationId of each url question → the session that asked it."""

    def session(self, session_id: str) -> ChildSession:
        found = self.sessions.get(session_id)
        if found is None:
            found = self.sessions[session_id] = ChildSession(session_id)
        return found

    def fail_all(self, code: str, message: str) -> None:
        """The agent process is gone: end every prompt that was waiting on it."""
        for child in self.sessions.values():
            child.deliver(PromptFailed(code, message))

    # -- the agent's notifications and requests --------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        child = self.session(session_id)
        child.note(update)
        if child.deliver(update):
            return
        if session_level(update):
            child.between.append(update)
            del child.between[:-BETWEEN_PROMPTS]
        else:
            kind = getattr(update, "session_update", type(update).__name__)
            log.debug("session %s: %s outside a prompt; not recorded", session_id, kind)

    def compaction(self, session_id: str, item: ChildCompaction) -> None:
        """A v1.25 compaction update (read off the wire, `compaction.py`): into the running
        prompt, which logs it; outside a prompt there is no turn to log it in."""
        if not self.session(session_id).deliver(item):
            log.debug("session %s: a compaction update outside a prompt; not recorded", session_id)

    async def request_permission(
        self,
        session_id: str,
        tool_call: acp.ToolCallUpdate,
        options: list[acp.PermissionOption],
        **kwargs: Any,
    ) -> acp.RequestPermissionResponse:
        asked = Asked(tool_call=tool_call, options=options)
        if not self.session(session_id).deliver(asked):
            log.info("session %s asked permission outside a prompt; cancelled", session_id)
            asked.reply(None)
        with anyio.move_on_after(self.answer_timeout_s):
            await asked.answered.wait()
        if asked.answer is None:
            asked.reply(None)
        assert asked.answer is not None
        return asked.answer

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        questioned = Questioned(message=message, mode=mode)
        session_id = getattr(mode, "session_id", None)
        elicitation_id = getattr(mode, "elicitation_id", None)
        if isinstance(elicitation_id, str) and isinstance(session_id, str):
            self.url_sessions[elicitation_id] = session_id
            for old in list(self.url_sessions)[:-URL_QUESTIONS]:
                del self.url_sessions[old]
        if not isinstance(session_id, str) or not self.session(session_id).deliver(questioned):
            log.info("the agent asked a question outside a prompt (%s); cancelled", session_id)
            questioned.reply(None)
        with anyio.move_on_after(self.answer_timeout_s):
            await questioned.answered.wait()
        questioned.reply(None)  # no effect once answered
        return questioned.answer

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        session_id = self.url_sessions.pop(elicitation_id, None)
        if session_id is None or not self.session(session_id).deliver(Completed(elicitation_id)):
            log.info("the agent completed url elicitation %s outside a prompt", elicitation_id)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> acp.ReadTextFileResponse:  # fmt: skip
        content = await self.workspace.read_text_file(path, line, limit)
        return acp.ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> acp.WriteTextFileResponse:
        await self.workspace.write_text_file(path, content)
        return acp.WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[acp.EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> acp.CreateTerminalResponse:
        terminal_id = self.workspace.create_terminal(command, args, env, cwd, output_byte_limit)
        return acp.CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp.TerminalOutputResponse:
        return self.workspace.output(terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp.WaitForTerminalExitResponse:
        return await self.workspace.wait_for_exit(terminal_id)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp.KillTerminalResponse:
        self.workspace.kill(terminal_id)
        return acp.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp.ReleaseTerminalResponse:
        self.workspace.release(terminal_id)
        return acp.ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        log.info("the bridged agent called _%s, which the bridge does not offer", method)
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("the bridged agent sent _%s; ignored", method)

    def on_connect(self, conn: Any) -> None:
        return None
