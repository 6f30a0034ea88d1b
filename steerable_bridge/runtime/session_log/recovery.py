"""Closing a turn that a crash left open, by appending — never by rewriting the log.

When a process dies mid-turn (kill -9, power loss), its log ends inside a run: a text
message may be open, a tool call half-streamed, a tool started without a result, a
compaction summary half-written. On the next load `close_interrupted_run` appends what a
clean end would have logged — `compaction_dropped` (failed) for a compaction that started
and never ended (the history never used its pieces), `*_end` for open messages,
`tool_call_end` for half-streamed calls, a `cancelled` result for every call without one,
`step_finished`, and a `run_failed` with code `interrupted` — so projection, replay and
both renderings see a well-formed run.
"""

from __future__ import annotations

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import SessionFacts
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.values import ToolError

__all__ = ["close_interrupted_run"]


def close_interrupted_run(log: SessionLog, facts: SessionFacts) -> list[ev.LoopEvent]:
    """Append the events that close the log's open run; returns them (empty if none open)."""
    if not facts.running or facts.last_run_id is None:
        return []
    run_id = facts.last_run_id
    still = _Open()
    for event in log.view().folded():  # deltas joined: runs of them held folded read as one
        if event.run_id == run_id:
            still.observe(event)
    added: list[ev.LoopEvent] = []

    def add(cls: type[ev.EventBase], **fields: object) -> None:
        event: ev.LoopEvent = log.record(cls, run_id, **fields)  # type: ignore[assignment]
        facts.observe(event)
        added.append(event)

    for compaction_id in still.compactions:
        add(
            ev.CompactionDropped,
            compaction_id=compaction_id,
            reason="failed",
            detail="the agent process stopped while the summary was being written; the"
            " conversation is unchanged",
        )
    for message_id in still.reasoning:
        add(ev.ReasoningEnd, message_id=message_id)
    for message_id in still.text:
        add(ev.TextEnd, message_id=message_id)
    for call_id, (name, parts) in still.calls.items():
        add(ev.ToolCallEnd, call_id=call_id, name=name, arguments_json="".join(parts))
    for call_id in list(facts.open_calls):
        add(
            ev.ToolFinished,
            call_id=call_id,
            status="cancelled",
            error=ToolError(
                code="interrupted", message="the agent process stopped during this call"
            ),
        )
    if still.step is not None:
        add(ev.StepFinished, step=still.step, finish_reason="error")
    add(
        ev.RunFailed,
        code="interrupted",
        message="the agent process stopped during this turn; it was closed when the session was"
        " next loaded. Send the prompt again to continue.",
    )
    return added


class _Open:
    """What one run's events left open: compactions, text and reasoning blocks, tool calls
    still streaming their arguments, and the step."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[str, tuple[str, list[str]]] = {}
        self.step: int | None = None
        self.compactions: list[str] = []

    def observe(self, event: ev.LoopEvent) -> None:
        self._blocks(event)
        self._calls(event)

    def _blocks(self, event: ev.LoopEvent) -> None:
        if isinstance(event, ev.CompactionStarted):
            self.compactions.append(event.compaction_id)
        elif isinstance(event, ev.Compaction | ev.CompactionDropped):
            if event.compaction_id in self.compactions:
                self.compactions.remove(event.compaction_id)
        elif isinstance(event, ev.TextStart):
            self.text.append(event.message_id)
        elif isinstance(event, ev.TextEnd) and event.message_id in self.text:
            self.text.remove(event.message_id)
        elif isinstance(event, ev.ReasoningStart):
            self.reasoning.append(event.message_id)
        elif isinstance(event, ev.ReasoningEnd) and event.message_id in self.reasoning:
            self.reasoning.remove(event.message_id)

    def _calls(self, event: ev.LoopEvent) -> None:
        if isinstance(event, ev.ToolCallStart):
            self.calls[event.call_id] = (event.name, [])
        elif isinstance(event, ev.ToolCallDelta) and event.call_id in self.calls:
            self.calls[event.call_id][1].append(event.delta)
        elif isinstance(event, ev.ToolCallEnd):
            self.calls.pop(event.call_id, None)
        elif isinstance(event, ev.StepStarted):
            self.step = event.step
        elif isinstance(event, ev.StepFinished):
            self.step = None
