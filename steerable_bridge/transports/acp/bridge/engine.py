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

A child prompt may span two of our runs: when the agent asks permission and our policy
defers (AG-UI), the run ends `interrupted` and the prompt is *parked* — its stream keeps
filling, the agent's request stays unanswered (the client bounds that wait) — until the next
run's `resume` answers it (`turn.py`). Every prompt runs under `prompt_timeout_s`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from acp import RequestError
from acp import schema as acp
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from steerable_bridge.runtime.environment import Environment
from steerable_bridge.runtime.turn import RunOutcome, TurnContext, TurnInput
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
from steerable_bridge.transports.acp.bridge.mapping import UpdateMapper
from steerable_bridge.transports.acp.bridge.workspace import ChildWorkspace

__all__ = ["SESSION_OPTION", "AcpBridge", "Parked", "Prompt"]

log = logging.getLogger("steerable_bridge.acp.bridge")

SESSION_OPTION = "acp.session"
"""The `config_changed` option id under which a conversation logs its child session id."""

_CURRENT = (acp.AvailableCommandsUpdate, acp.CurrentModeUpdate, acp.ConfigOptionUpdate)
"""What a `session/load` replay says that still holds now (not its old plans or titles)."""

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
                if live.can_resume:
                    await live.conn.resume_session(session_id=session_id, cwd=cwd)
                else:
                    await live.conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=[])
                    child = self.client.session(session_id)  # the replay is already logged:
                    child.between = [u for u in child.between if isinstance(u, _CURRENT)]
        except RequestError as error:
            return f"it answered {error} ({error.code})"
        except TimeoutError:
            return f"it did not answer within {REQUEST_TIMEOUT_S:g} s"
        return None

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


def _data(error: RequestError) -> str:
    data = error.data
    if isinstance(data, dict) and data.get("details"):
        return f": {data['details']}"
    if isinstance(data, dict) and data.get("message"):
        return f": {data['message']}"
    return ""
