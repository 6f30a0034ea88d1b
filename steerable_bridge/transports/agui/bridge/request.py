"""The `RunAgentInput` of one bridged AG-UI run, built from the bridge's own session log.

Most AG-UI servers keep no conversation of their own (pydantic-ai's `AGUIAdapter`, most
LangGraph deployments without a checkpointer): every run must carry the whole thread. So
`run_input(...)` sends the conversation as the log holds it, folded into AG-UI messages by
`history.thread_messages` — user messages under the ids the bridge logged them with,
assistant text and tool calls under the server's own ids, tool results — leaving out what
`HttpAgent` leaves out of its inputs (activity messages) and reasoning, which servers do not
take back. A server that does keep threads (ours) recognises the ids and adds nothing
twice. `threadId` is the session id; `state` the last state the log knows; `tools` and
`context` are empty (an editor brings no frontend tools); `resume` answers the interrupts
of the run before (`forwarded_props` carries ag-ui-langgraph's `command.resume`
instead). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ag_ui.core import PROTOCOL_VERSION, ResumeEntry, RunAgentInput
from pydantic import JsonValue

from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.agui.history import thread_messages

__all__ = ["run_input"]

_LEFT_OUT = frozenset({"activity", "reasoning"})


def run_input(
    thread_id: str,
    run_id: str,
    events: Iterable[LoopEvent],
    *,
    state: JsonValue,
    resume: Sequence[ResumeEntry] = (),
    parent_run_id: str | None = None,
    forwarded_props: dict[str, Any] | None = None,
) -> RunAgentInput:
    """The input of one AG-UI run continuing the conversation `events` hold."""
    messages = [m for m in thread_messages(thread_id, events) if m.role not in _LEFT_OUT]
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        parent_run_id=parent_run_id,
        protocol_version=PROTOCOL_VERSION,
        messages=messages,
        state=state if state is not None else {},
        tools=[],
        context=[],
        forwarded_props=forwarded_props or {},
        resume=list(resume) or None,
    )
