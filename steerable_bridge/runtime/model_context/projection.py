"""Deterministic projections of a session log: model history, shared state, session facts.

`project_history(events)` is the only way the loop learns what the model has said and done:
the same events always give the same messages, and an event type it does not know is an
error (`ProjectionError`), never silently skipped; a `hook_action` with a `message` is a
user message (a hook's or guard's instruction to the model) — a newer build's event must not vanish
from the model's view. The other folds (`project_state`, `session_facts`) read the same log
for the shared AG-UI state, the current mode, the title, remembered permission answers and
tool calls still waiting for a result.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from pydantic import JsonValue

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import (
    Message,
    TextPart,
    ThinkingBlock,
    ToolCall,
    ToolContent,
    ToolError,
)

__all__ = [
    "BOUNDARIES",
    "History",
    "ProjectionError",
    "SessionFacts",
    "carries_facts",
    "event_message",
    "fold_tool_result",
    "history_entries",
    "is_folded",
    "project_history",
    "project_state",
    "session_facts",
]


class ProjectionError(Exception):
    """The log holds an event this build cannot project; upgrade steerable-bridge."""


_NO_HISTORY: tuple[type[ev.EventBase], ...] = (
    ev.RunStarted,
    ev.RunFinished,
    ev.RunFailed,
    ev.StepStarted,
    ev.StepFinished,
    ev.ModelRequestEvent,
    ev.TextStart,
    ev.TextEnd,
    ev.ReasoningStart,
    ev.ToolCallStart,
    ev.ToolCallDelta,
    ev.ToolStarted,
    ev.ToolOutput,
    ev.PermissionRequested,
    ev.PermissionResolved,
    ev.QuestionAsked,
    ev.QuestionAnswered,
    ev.QuestionCompleted,
    ev.PlanUpdated,
    ev.StateSnapshot,
    ev.StateDelta,
    ev.ModeChanged,
    ev.ConfigChanged,
    ev.CommandsUpdated,
    ev.SessionInfo,
    ev.UsageUpdated,
    ev.BudgetExhausted,
    ev.SoftTimeout,
    ev.CompactionStarted,
    ev.CompactionSummaryDelta,
    ev.CompactionDropped,
    ev.Notice,
)
"""Kinds that never change the model's history (they are still logged and rendered)."""


_OWN_MESSAGE = (ev.ToolFinished, ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied)
"""Kinds that are one message of the history each."""


class _Assistant:
    """The assistant message being assembled from one model call's events."""

    __slots__ = ("block", "calls", "id", "reasoning", "text", "thinking")

    def __init__(self, message_id: str) -> None:
        self.id = message_id
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.block: list[str] = []
        """The reasoning of the block still open (sealed by its `reasoning_end`)."""
        self.thinking: list[ThinkingBlock] = []
        self.calls: list[ToolCall] = []

    def end_reasoning(self, event: ev.ReasoningEnd) -> None:
        text, self.block = "".join(self.block), []
        if event.signature is not None or event.redacted_data is not None:
            self.thinking.append(
                ThinkingBlock(
                    text=text, signature=event.signature, redacted_data=event.redacted_data
                )
            )

    def message(self) -> Message:
        text = "".join(self.text)
        return Message(
            id=self.id,
            role="assistant",
            content=(TextPart(text=text),) if text else (),
            reasoning="".join(self.reasoning) or None,
            thinking=tuple(self.thinking),
            tool_calls=tuple(self.calls),
        )


def project_history(events: Iterable[LoopEvent]) -> tuple[Message, ...]:
    """The model's view of the conversation, rebuilt from the log."""
    return History().extend(events).messages()


FOLDED_MARKER = "[folded tool result:"
"""How a tool result folded by a `tool_results` compaction starts (it is never folded twice)."""

SUMMARY_HEADER = "Summary of the conversation so far:\n"


def history_entries(events: Iterable[LoopEvent]) -> list[tuple[int, Message]]:
    """`project_history` with the seq each message starts at (a summary: its `through_seq`).

    A `compaction` of scope `history` drops every message that starts at or before its
    `through_seq` and puts the summary first; messages after it (the turns kept verbatim)
    stay. Scope `tool_results` folds the tool results through `through_seq` to a stub.
    """
    return list(History().extend(events).entries())


BOUNDARIES = (ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied, ev.StepStarted, ev.RunStarted)
"""Events before which the model's history can be cut: no message is half-built there."""


class History:
    """The model's history of a log, kept up to date one event at a time.

    `observe(event)` folds the next event in, in seq order (the log calls it for each event
    it holds, from the newest compaction boundary on when it was loaded from a tail);
    `entries()` and `messages()` are then what `history_entries` / `project_history` give
    for every event observed so far, without going over those events again. It also keeps
    what the compactor plans a cut from: the newest history compaction's `through_seq`
    (`floor`), the seqs after it where the history may be cut (`cuts`), whether a tool call
    is open, and the user messages after the floor. An event this build cannot project is
    remembered and raised (`ProjectionError`) by every later read, as the fold from scratch
    raises it. The state is a cache of the log: `History().extend(log)` rebuilds it.
    """

    __slots__ = (
        "_cuts",
        "_entries",
        "_error",
        "_list",
        "_messages",
        "_open",
        "_start",
        "_users",
        "current",
        "floor",
        "last_seq",
    )

    def __init__(self) -> None:
        self._entries: list[tuple[int, Message]] = []
        self._list: list[Message] = []
        """The messages of `_entries`, in order (so a read copies pointers, nothing more)."""
        self.current: _Assistant | None = None
        """The assistant message still being streamed (not yet in `_entries`)."""
        self._start = 0
        self._error: ProjectionError | None = None
        self._messages: tuple[Message, ...] | None = None
        self.floor = -1
        """The largest `through_seq` of a history compaction observed (-1: none)."""
        self._cuts: list[tuple[int, bool]] = []
        self._open: set[str] = set()
        self._users: list[int] = []
        self.last_seq: int | None = None

    def extend(self, events: Iterable[LoopEvent]) -> History:
        """Observe each of `events` in order; returns self."""
        for event in events:
            self.observe(event)
        return self

    def observe(self, event: LoopEvent) -> None:
        """Fold one more event in (the next one of the log)."""
        self.last_seq = event.seq
        if type(event) is ev.TextDelta:  # the hot path: one per streamed token
            self._begin(event.message_id, event.seq).text.append(event.delta)
            self._messages = None
            return
        if self._error is not None:
            return
        _HISTORY_STEPS.get(type(event), History._unknown)(self, event)

    def _boundary(self, event: ev.EventBase) -> None:
        if not self._open and event.seq - 1 > self.floor:
            self._cuts.append((event.seq - 1, not isinstance(event, ev.StepStarted)))
        if isinstance(event, ev.UserMessage):
            self._users.append(event.seq)

    def _reasoning_delta(self, event: ev.ReasoningDelta) -> None:
        assistant = self._begin(event.message_id, event.seq)
        assistant.reasoning.append(event.delta)
        assistant.block.append(event.delta)
        self._messages = None

    def _reasoning_end(self, event: ev.ReasoningEnd) -> None:
        self._begin(event.message_id, event.seq).end_reasoning(event)
        self._messages = None

    def _tool_call_end(self, event: ev.ToolCallEnd) -> None:
        self._open.add(event.call_id)
        self._begin(f"asst-{event.call_id}", event.seq).calls.append(
            ToolCall(call_id=event.call_id, name=event.name, arguments_json=event.arguments_json)
        )
        self._messages = None

    def _end(self, event: ev.EventBase) -> None:
        self._flush()

    def _own(
        self, event: ev.ToolFinished | ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied
    ) -> None:
        if isinstance(event, ev.ToolFinished):
            self._open.discard(event.call_id)
        self._flush()
        self._add(event.seq, _own_message(event))
        self._messages = None

    def _boundary_own(self, event: ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied) -> None:
        self._boundary(event)
        self._own(event)

    def _hook(self, event: ev.HookAction) -> None:
        if not event.message:
            return
        self._flush()
        self._add(event.seq, _own_message(event))
        self._messages = None

    def _compaction(self, event: ev.Compaction) -> None:
        self._flush()
        self._entries = _compact(self._entries, event)
        self._list = [message for _, message in self._entries]
        if event.scope == "history" and event.through_seq > self.floor:
            floor = self.floor = event.through_seq
            self._cuts = [cut for cut in self._cuts if cut[0] > floor]
            self._users = [seq for seq in self._users if seq > floor]
        self._messages = None

    def _ignore(self, event: ev.EventBase) -> None:
        pass

    def _unknown(self, event: object) -> None:
        self._error = ProjectionError(
            f"cannot project event kind {getattr(event, 'kind', type(event).__name__)!r}"
            f" (seq {getattr(event, 'seq', '?')}); upgrade steerable-bridge to read this log"
        )

    def _begin(self, message_id: str, seq: int) -> _Assistant:
        current = self.current
        if current is None:
            current = self.current = _Assistant(message_id)
            self._start = seq
        return current

    def _add(self, seq: int, message: Message) -> None:
        self._entries.append((seq, message))
        self._list.append(message)

    def _flush(self) -> None:
        current = self.current
        if current is not None:
            if current.text or current.calls or current.reasoning or current.thinking:
                self._add(self._start, current.message())
                self._messages = None
            self.current = None

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def entries(self) -> tuple[tuple[int, Message], ...]:
        """Every message with the seq it starts at, as `history_entries` gives them."""
        self._check()
        entries = tuple(self._entries)
        current = self.current
        if current is not None and (
            current.text or current.calls or current.reasoning or current.thinking
        ):
            entries += ((self._start, current.message()),)
        return entries

    def messages(self) -> tuple[Message, ...]:
        """The model's view of the conversation, as `project_history` gives it; the same
        tuple until an event changes it."""
        self._check()
        if self._messages is None:
            current = self.current
            messages = tuple(self._list)
            if current is not None and (
                current.text or current.calls or current.reasoning or current.thinking
            ):
                messages += (current.message(),)
            self._messages = messages
        return self._messages

    def cuts(self) -> list[tuple[int, bool]]:
        """The seqs after `floor` where the history can be cut, ascending, each with whether
        it cuts between turns (not inside one at a step): before every boundary event seen
        with no tool call open, and after the last event when none is open now."""
        self._check()
        cuts = list(self._cuts)
        last = self.last_seq
        if last is not None and not self._open and last > self.floor:
            cuts.append((last, True))
        return cuts

    def turns(self, after: int, through: int) -> int:
        """How many user messages after the floor lie in `after < seq <= through`."""
        users = self._users
        return bisect.bisect_right(users, through) - bisect.bisect_right(users, after)


_HISTORY_STEPS: dict[type, Callable[[History, Any], None]] = {
    **dict.fromkeys(_NO_HISTORY, History._ignore),
    ev.ReasoningDelta: History._reasoning_delta,
    ev.ReasoningEnd: History._reasoning_end,
    ev.ToolCallEnd: History._tool_call_end,
    ev.ModelResponseEvent: History._end,
    ev.RunFinished: History._end,
    ev.RunFailed: History._end,
    **dict.fromkeys(_OWN_MESSAGE, History._own),
    ev.HookAction: History._hook,
    ev.Compaction: History._compaction,
    ev.UserMessage: History._boundary_own,
    ev.SteerApplied: History._boundary_own,
    ev.FollowUpApplied: History._boundary_own,
    ev.StepStarted: History._boundary,
    ev.RunStarted: History._boundary,
}
"""What `History.observe` does with each kind of event other than a text delta (any kind
not here is one this build cannot project)."""


def _compact(
    messages: list[tuple[int, Message]], event: ev.Compaction
) -> list[tuple[int, Message]]:
    through = event.through_seq
    if event.scope == "tool_results":
        folded = [
            (seq, fold_tool_result(message) if seq <= through else message)
            for seq, message in messages
        ]
        if event.notice:
            folded.append((event.seq, _own_message(event)))
        return folded
    summary = _own_message(event)
    return [(through, summary), *((seq, m) for seq, m in messages if seq > through)]


def _summary(event: ev.Compaction) -> Message:
    text = SUMMARY_HEADER + event.summary
    if event.notice:
        text += "\n\n" + event.notice
    return Message(id=f"compaction-{event.seq}", role="user", content=(TextPart(text=text),))


def _notice(event: ev.Compaction) -> Message:
    return Message(
        id=f"compaction-notice-{event.seq}", role="user", content=(TextPart(text=event.notice),)
    )


def fold_tool_result(message: Message) -> Message:
    """A tool result reduced to a stub naming its size (already folded ones unchanged)."""
    if message.role != "tool" or is_folded(message):
        return message
    size = sum(len(part.text) for part in message.content if isinstance(part, TextPart))
    stub = (
        f"{FOLDED_MARKER} {size} characters of output from an earlier step were removed to"
        " save context; run the tool again if you need them]"
    )
    return Message(
        id=message.id,
        role="tool",
        content=(TextPart(text=stub),),
        tool_call_id=message.tool_call_id,
        is_error=message.is_error,
    )


def is_folded(message: Message) -> bool:
    """True for a tool result a `tool_results` compaction already folded."""
    first = message.content[0] if message.content else None
    return isinstance(first, TextPart) and first.text.startswith(FOLDED_MARKER)


def event_message(event: LoopEvent) -> Message | None:
    """The one message `event` adds to the model's history by itself, exactly as
    `history_entries` puts it there (None for events that add none, or only together with
    others, like the deltas of an assistant message). A store may keep such a message as a
    reference to the event's seq (`adapters/storage/references.py`)."""
    if isinstance(event, _OWN_MESSAGE):
        return _own_message(event)
    if isinstance(event, ev.HookAction):
        return _own_message(event) if event.message else None
    if isinstance(event, ev.Compaction):
        return _own_message(event) if event.scope == "history" or event.notice else None
    return None


def _own_message(
    event: ev.ToolFinished
    | ev.UserMessage
    | ev.SteerApplied
    | ev.FollowUpApplied
    | ev.HookAction
    | ev.Compaction,
) -> Message:
    if isinstance(event, ev.ToolFinished):
        return _tool_message(event)
    if isinstance(event, ev.HookAction):
        return Message(id=f"note-{event.seq}", role="user", content=(TextPart(text=event.message),))
    if isinstance(event, ev.Compaction):
        return _summary(event) if event.scope == "history" else _notice(event)
    return Message(id=event.message_id, role="user", content=event.content)


def _tool_message(event: ev.ToolFinished) -> Message:
    content: tuple[ToolContent, ...] = event.content
    if event.error is not None and not content:
        content = (TextPart(text=_error_text(event.error)),)
    return Message(
        id=f"result-{event.call_id}",
        role="tool",
        content=content,
        tool_call_id=event.call_id,
        is_error=event.status != "completed",
    )


def _error_text(error: ToolError) -> str:
    return f"error [{error.code}]: {error.message}"


def project_state(events: Iterable[LoopEvent]) -> JsonValue:
    """The shared state: the last snapshot with every later JSON Patch applied."""
    return session_facts(events).state


@dataclass(slots=True)
class SessionFacts:
    """Facts about a session that the log determines (never stored twice)."""

    title: str | None = None
    mode_id: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    always: dict[str, bool] = field(default_factory=dict)
    """Remembered answers per `approval_key` (the tool name, or `run_command:git status`
    for a command): True = allow always, False = reject always."""
    open_calls: dict[str, ev.ToolCallEnd] = field(default_factory=dict)
    """Tool calls the model made that have no result yet, in call order."""
    open_questions: dict[str, ev.QuestionAsked] = field(default_factory=dict)
    """Questions asked and not answered yet (by question id), in the order asked."""
    running: bool = False
    """A run started and has not finished (a crash or kill left it open)."""
    last_run_id: str | None = None
    state: JsonValue = field(default_factory=dict)
    """The shared state: the last snapshot with every later JSON Patch applied."""

    def observe(self, event: LoopEvent) -> None:
        """Fold one more event in (the loop calls this for every event it logs)."""
        step = _FACT_STEPS.get(type(event))
        if step is not None:  # most events (every streamed delta) carry no fact
            step(self, event)

    def _session_info(self, event: ev.SessionInfo) -> None:
        self.title = event.title

    def _mode(self, event: ev.ModeChanged) -> None:
        self.mode_id = event.mode_id

    def _config(self, event: ev.ConfigChanged) -> None:
        self.config[event.option_id] = event.value

    def _permission(self, event: ev.PermissionResolved) -> None:
        key = event.approval_key or event.tool_name  # a command's key has its shape
        if event.outcome == "allow_always":
            self.always[key] = True
        elif event.outcome == "reject_always":
            self.always[key] = False

    def _call(self, event: ev.ToolCallEnd) -> None:
        self.open_calls[event.call_id] = event

    def _asked(self, event: ev.QuestionAsked) -> None:
        self.open_questions[event.question_id] = event

    def _answered(self, event: ev.QuestionAnswered) -> None:
        self.open_questions.pop(event.question_id, None)

    def _result(self, event: ev.ToolFinished) -> None:
        self.open_calls.pop(event.call_id, None)

    def _run_started(self, event: ev.RunStarted) -> None:
        self.running = True
        self.last_run_id = event.run_id

    def _run_ended(self, event: ev.RunFinished | ev.RunFailed) -> None:
        self.running = False

    def _snapshot(self, event: ev.StateSnapshot) -> None:
        self.state = json.loads(event.state_json)

    def _delta(self, event: ev.StateDelta) -> None:
        self.state = jsonpatch.apply_patch(self.state, json.loads(event.patch_json))


_FACT_STEPS: dict[type, Callable[[SessionFacts, Any], None]] = {
    ev.SessionInfo: SessionFacts._session_info,
    ev.ModeChanged: SessionFacts._mode,
    ev.ConfigChanged: SessionFacts._config,
    ev.PermissionResolved: SessionFacts._permission,
    ev.ToolCallEnd: SessionFacts._call,
    ev.QuestionAsked: SessionFacts._asked,
    ev.QuestionAnswered: SessionFacts._answered,
    ev.ToolFinished: SessionFacts._result,
    ev.RunStarted: SessionFacts._run_started,
    ev.RunFinished: SessionFacts._run_ended,
    ev.RunFailed: SessionFacts._run_ended,
    ev.StateSnapshot: SessionFacts._snapshot,
    ev.StateDelta: SessionFacts._delta,
}
"""What `SessionFacts.observe` does with each kind of event that carries a fact (every
other kind, the streamed deltas first among them, changes none)."""


_FACT_KINDS: tuple[type[ev.EventBase], ...] = (
    ev.SessionInfo,
    ev.ModeChanged,
    ev.ConfigChanged,
    ev.StateSnapshot,
    ev.StateDelta,
)


def carries_facts(event: LoopEvent) -> bool:
    """True for events `SessionFacts` needs even when they lie before a compaction.

    Title, mode, config, remembered permission answers and shared state outlive a
    compaction; a store's tail read keeps these events so a resumed session knows them.
    """
    if isinstance(event, ev.PermissionResolved):
        return event.outcome in ("allow_always", "reject_always")
    return isinstance(event, _FACT_KINDS)


def session_facts(events: Iterable[LoopEvent]) -> SessionFacts:
    """Fold the log into the facts the runtime needs to continue a session."""
    facts = SessionFacts()
    for event in events:
        facts.observe(event)
    return facts
