"""Requests for a thread whose turn is already running — here or in another process.

A `RunAgentInput` for a thread that a run holds does not start a turn. `Control.answer`
decides what it gets, the same whichever server process the request lands on (several
`--workers`, or several servers sharing one PostgreSQL):

- `forwardedProps.steerable.stop: true` cancels the running turn (through the store's
  signals when another process runs it) and answers a short stream — RUN_STARTED, CUSTOM
  `steerable.stop_requested`, RUN_FINISHED; with no turn running anywhere it is refused
  (409 `thread_idle`);
- `forwardedProps.steerable.steer: true` adds the request's new user messages to the running
  turn at its next step boundary and answers RUN_STARTED, CUSTOM `steerable.steer_absorbed`,
  RUN_FINISHED; each message travels with its id, which the owning process logs with it, so
  no process records it again when the client sends it back in a later run;
- `forwardedProps.steerable.follow_up: true` queues them for when the running turn would
  otherwise end (it then goes on with them) and answers RUN_STARTED, CUSTOM
  `steerable.follow_up_queued`, RUN_FINISHED;
- `forwardedProps.steerable.command: "compact"` asks the turn running here to compact at its
  next step boundary (`port.request_compact`) and answers RUN_STARTED, CUSTOM
  `steerable.compact_requested`, RUN_FINISHED (an unknown command is refused with 422
  `unknown_command`);
- anything else is refused with 409 `thread_busy`, naming the process that runs it when it
  is another one.

Everything goes through the agent port (`port.cancel`, `.steer`, `.follow_up`), which
reaches the turn wherever it runs; which of the request's messages are new is read against
the thread's history, brought up to date first (`Threads.catch_up`: another process may have
logged more). Refusals come back as `ControlRefusal` values; the app turns them into its error body.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, UserMessage

from steerable_bridge.runtime.ports.port import AgentPort
from steerable_bridge.runtime.ports.storage import SessionNotFound
from steerable_bridge.transports.agui.inputs import (
    InputError,
    command_requested,
    content_parts,
    follow_up_requested,
    steer_requested,
    stop_requested,
)
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.stream import EventStream
from steerable_bridge.transports.agui.threads import Threads
from steerable_bridge.transports.agui.wire import SseEncoder

__all__ = ["Control", "ControlRefusal"]


@dataclass(frozen=True, slots=True)
class ControlRefusal:
    """An HTTP error answer: status, stable code, message naming the remedy."""

    status: int
    code: str
    message: str


class Control:
    """Answers requests that reach a running thread (see the module docstring)."""

    def __init__(self, port: AgentPort, threads: Threads, *, keepalive_s: float) -> None:
        self.port = port
        self.threads = threads
        self.keepalive_s = keepalive_s

    async def answer(self, run: RunAgentInput, owner: str | None) -> EventStream | ControlRefusal:
        """The answer for `run`, whose thread is busy here (`owner` None) or runs in the
        process `owner` names — or, for a stop request, may run nowhere."""
        forwarded = await self.forward(run)
        if forwarded is not None:
            return forwarded
        where = f" in {owner}" if owner is not None else ""
        return ControlRefusal(
            409,
            "thread_busy",
            f"thread {run.thread_id} is already running{where}; wait for its RUN_FINISHED,"
            " abort it or send forwardedProps.steerable.stop: true to stop it, or send"
            " forwardedProps.steerable.steer: true to add your message to the running turn"
            " (follow_up: true to have it taken when the turn would end)",
        )

    async def forward(self, run: RunAgentInput) -> EventStream | ControlRefusal | None:
        """The stop, command, steer or follow-up `run` asks for, taken by the thread's
        running turn wherever it runs; None when it asks for none or no turn took it."""
        thread_id = run.thread_id
        if stop_requested(run):
            if await self.port.cancel(thread_id, "stopped by a client's stop request"):
                return self._short(run, "steerable.stop_requested", {"sessionId": thread_id})
            return ControlRefusal(
                409,
                "thread_idle",
                f"thread {thread_id} is not running a turn; there is nothing to stop",
            )
        try:
            command = command_requested(run)
        except InputError as err:
            return ControlRefusal(422, err.code, err.message)
        if command == "compact" and await self.port.request_compact(thread_id):
            return self._short(run, "steerable.compact_requested", {"sessionId": thread_id})
        steer, follow_up = steer_requested(run), follow_up_requested(run)
        if steer or follow_up:
            thread = self.threads.get(thread_id)
            # learn what the turn (here or in another process) has logged so far; with no
            # conversation anywhere, every user message is new
            with contextlib.suppress(SessionNotFound):
                await self.threads.catch_up(thread)
            thread.messages()
            new = [
                m for m in run.messages if m.id not in thread.known and isinstance(m, UserMessage)
            ]
            queue = self.port.steer if steer else self.port.follow_up
            taken: list[str] = []
            for message in new:  # each under its own id, so the owner's log knows it
                content = tuple(content_parts(message.content))
                if not content or not await queue(thread_id, content, message.id):
                    break
                taken.append(message.id)
            if taken:
                thread.known |= set(taken)
                return self._short(
                    run,
                    "steerable.steer_absorbed" if steer else "steerable.follow_up_queued",
                    {"messageIds": taken, "sessionId": thread_id},
                )
        return None

    def _short(self, run: RunAgentInput, name: str, value: dict[str, Any]) -> EventStream:
        renderer = AguiRenderer(thread_id=run.thread_id, run_id=run.run_id)
        frames = SseEncoder(renderer).encode_models(renderer.derived_run(name, value))

        async def produce(write: Any) -> None:
            await write(frames)

        return EventStream(produce, keepalive_s=self.keepalive_s)
