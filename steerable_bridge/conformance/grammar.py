"""Hypothesis strategies for grammatically valid LoopEvent sequences (needs `hypothesis`).

`sessions()` draws one session's log the way the loop writes it: session-level events
(mode, config, commands, title) between runs, and runs that open with `run_started`, maybe
take shared state and a user message, then run steps — steering, `step_started`, the model
request, reasoning / text / tool-call streams each opened, fed and closed, the response and
usage, each call's execution (permission asked and answered, started, output, finished: every
call gets exactly one result), plan and state changes, control events — and end with exactly
one `run_finished` or `run_failed`. `seq` rises by one per event from 0 and `ts` never goes
back. Property tests render these through a transport's renderer and decode them back
(`decode(render(x)) == x`). Import this module only where hypothesis is installed (tests,
`steerable-bridge conformance`); the rest of the package does not need it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pydantic import JsonValue

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.ports.permissions import DEFAULT_OPTIONS
from steerable_bridge.runtime.values import (
    Command,
    ContentPart,
    DiffContent,
    ImagePart,
    Interrupt,
    Location,
    Message,
    PlanEntry,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolCall,
    ToolContent,
    ToolError,
    Usage,
    canonical_json,
)

__all__ = ["json_values", "sessions", "tool_contents"]

_short = st.text(max_size=12)
_ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=10)
_count = st.integers(min_value=0, max_value=100_000)

json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _short,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_short, inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value (finite numbers only)."""

_usage = st.builds(
    Usage,
    prompt_tokens=_count,
    completion_tokens=_count,
    cached_tokens=_count,
    reasoning_tokens=_count,
    cache_creation_tokens=_count,
)
_text_part = st.builds(TextPart, text=_short)
_image_part = st.builds(
    ImagePart,
    data=st.sampled_from(["iVBORw0KGgo=", "R0lGODlhAQABAAAAACw="]),
    mime_type=st.sampled_from(["image/png", "image/gif"]),
    uri=st.none() | st.just("file:///tmp/a.png"),
)
_resource_part = st.builds(
    ResourcePart,
    uri=st.sampled_from(["file:///tmp/a.py", "https://example.com/x"]),
    text=st.none() | _short,
    mime_type=st.none() | st.just("text/plain"),
    name=st.none() | _ident,
)
content_parts: st.SearchStrategy[ContentPart] = st.one_of(_text_part, _image_part, _resource_part)
tool_contents: st.SearchStrategy[ToolContent] = st.one_of(
    _text_part,
    _image_part,
    _resource_part,
    st.builds(DiffContent, path=st.just("/w/a.py"), old_text=st.none() | _short, new_text=_short),
    st.builds(TerminalContent, terminal_id=_ident),
)
_plan = st.lists(
    st.builds(
        PlanEntry,
        content=_short,
        priority=st.sampled_from(["high", "medium", "low"]),
        status=st.sampled_from(["pending", "in_progress", "completed"]),
    ),
    max_size=3,
).map(tuple)
_options = st.just(DEFAULT_OPTIONS)

# What the steps below draw from, built once here: a strategy built inside a draw (`st.none()
# | _short`, `st.sampled_from([...])`, `st.lists(...)`) is a new object that hypothesis
# validates again on every draw, which was a third of drawing a session. The same strategies,
# so the same choices draw the same sessions.
_maybe_short = st.none() | _short
_maybe_ident = st.none() | _ident
_maybe_empty = st.just("") | _short
_maybe_count = st.none() | _count
_maybe_model = st.none() | st.just("scripted:x")
_maybe_schema = st.none() | st.just('{"type":"object"}')
_temperatures = st.none() | st.floats(min_value=0, max_value=2)
_json_objects = st.dictionaries(_ident, json_values, max_size=3)
_some_parts = st.lists(content_parts, min_size=1, max_size=2)
_answers = st.lists(content_parts, max_size=1)
_outputs = st.lists(tool_contents, min_size=1, max_size=2)
_results = st.lists(tool_contents, max_size=2)
_raw_outputs = st.none() | json_values.map(canonical_json)
_locations = st.lists(
    st.builds(Location, path=st.just("/w/a.py"), line=st.none() | st.integers(0, 99)),
    max_size=2,
)
_commands = st.lists(
    st.builds(Command, name=_ident, description=_short, input_hint=st.none() | _short),
    max_size=2,
)
_pieces = st.lists(_short, min_size=1, max_size=3)
_summary_pieces = st.lists(_short.filter(bool), max_size=3)
_seals = st.sampled_from(["none", "signed", "redacted"])
_executors = st.sampled_from(["backend", "backend", "frontend"])
_tool_kinds = st.sampled_from(["read", "edit", "execute", "think", "other"])
_step_finishes = st.sampled_from(["end_turn", "max_tokens"])
_outcomes = st.sampled_from(
    ["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
)
_sandboxes = st.sampled_from([None, "bwrap", "none", "client"])
_statuses = st.sampled_from(["completed", "failed", "cancelled"])
_summary_triggers = st.sampled_from(["pressure", "overflow", "manual"])
_triggers = st.sampled_from(["pressure", "overflow", "micro", "manual"])
_drop_reasons = st.sampled_from(["cancelled", "declined", "failed"])
_severities = st.sampled_from(["info", "warning", "error"])
_scopes = st.sampled_from(["history", "tool_results"])
_modes = st.sampled_from(["default", "read-only"])
_models = st.sampled_from(["demo:default", "scripted:x"])
_run_stops = st.sampled_from(["end_turn", "max_tokens", "max_steps", "refusal", "cancelled"])
_session_ids = st.sampled_from(["sess-1", "thread_ab"])


@dataclass(slots=True)
class _Log:
    """Builds events with the next seq and a non-decreasing ts."""

    session_id: str
    events: list[LoopEvent] = field(default_factory=list)
    ts: int = 1_764_000_000_000
    state_keys: list[str] = field(default_factory=list)

    def add(self, draw: Any, cls: type[Any], run_id: str, **fields: Any) -> None:
        self.ts += draw(st.integers(min_value=0, max_value=50))
        event = cls(
            session_id=self.session_id, run_id=run_id, seq=len(self.events), ts=self.ts, **fields
        )
        self.events.append(event)


def _stream(
    draw: Any, log: _Log, run_id: str, kind: str, message_id: str, start: type[Any]
) -> None:
    """A text or reasoning stream: start, one to three deltas, end."""
    log.add(draw, start, run_id, message_id=message_id)
    delta = ev.TextDelta if kind == "text" else ev.ReasoningDelta
    end = ev.TextEnd if kind == "text" else ev.ReasoningEnd
    for piece in draw(_pieces):
        log.add(draw, delta, run_id, message_id=message_id, delta=piece)
    seal = "none" if kind == "text" else draw(_seals)
    if seal == "signed":  # a provider's seal over the block (Anthropic's signed thinking)
        log.add(draw, end, run_id, message_id=message_id, signature=draw(_short))
    elif seal == "redacted":
        log.add(draw, end, run_id, message_id=message_id, redacted_data=draw(_short))
    else:
        log.add(draw, end, run_id, message_id=message_id)


def _arguments(draw: Any) -> str:
    if draw(st.booleans()):
        return canonical_json(draw(_json_objects))
    return str(draw(_short))


def _step(draw: Any, log: _Log, run_id: str, step: int, prefix: str) -> list[str]:
    """One step; returns the ids of calls it left waiting for the client."""
    for _ in range(draw(st.integers(min_value=0, max_value=1))):
        log.add(
            draw,
            ev.SteerApplied,
            run_id,
            message_id=f"{prefix}-steer",
            content=tuple(draw(_some_parts)),
        )
    log.add(draw, ev.StepStarted, run_id, step=step)
    request = ModelRequest(
        model="scripted:x",
        system=draw(_short),
        messages=(
            Message(id=f"{prefix}-u", role="user", content=(TextPart(text=draw(_short)),)),
            Message(
                id=f"{prefix}-a",
                role="assistant",
                reasoning=draw(_maybe_short),
                tool_calls=(ToolCall(call_id="old", name="f", arguments_json="{}"),),
            ),
            Message(id="result-old", role="tool", tool_call_id="old", is_error=True),
        ),
        tools=(ToolSpec(name="f", description="d", parameters_json='{"type":"object"}'),),
        temperature=draw(_temperatures),
    )
    log.add(draw, ev.ModelRequestEvent, run_id, step=step, request=request)
    message_id = f"{prefix}-m"
    if draw(st.booleans()):
        _stream(draw, log, run_id, "reasoning", f"{prefix}-r", ev.ReasoningStart)
    if draw(st.booleans()):
        _stream(draw, log, run_id, "text", message_id, ev.TextStart)
    calls: list[tuple[str, str]] = []
    for index in range(draw(st.integers(min_value=0, max_value=2))):
        call_id, name = f"{prefix}-c{index}", draw(_ident)
        arguments = _arguments(draw)
        log.add(
            draw, ev.ToolCallStart, run_id, call_id=call_id, name=name, parent_message_id=message_id
        )
        cut = draw(st.integers(min_value=0, max_value=len(arguments)))
        for piece in (arguments[:cut], arguments[cut:]):
            if piece:
                log.add(draw, ev.ToolCallDelta, run_id, call_id=call_id, delta=piece)
        executor = draw(_executors)
        log.add(
            draw,
            ev.ToolCallEnd,
            run_id,
            call_id=call_id,
            name=name,
            arguments_json=arguments,
            tool_kind=draw(_tool_kinds),
            title=draw(_short),
            locations=tuple(draw(_locations)),
            executor=executor,
        )
        calls.append((call_id, executor))
    finish = "tool_calls" if calls else draw(_step_finishes)
    log.add(
        draw,
        ev.ModelResponseEvent,
        run_id,
        step=step,
        finish_reason=finish,
        usage=draw(_usage),
        model=draw(_maybe_model),
    )
    log.add(
        draw,
        ev.UsageUpdated,
        run_id,
        used=draw(_count),
        size=draw(_maybe_count),
        cache_read_tokens=draw(_count),
        cache_creation_tokens=draw(_count),
    )
    pending: list[str] = []
    for call_id, executor in calls:
        if executor == "frontend":
            pending.append(call_id)
            continue
        _run_call(draw, log, run_id, call_id)
    log.add(draw, ev.StepFinished, run_id, step=step, finish_reason=finish, usage=draw(_usage))
    return pending


def _run_call(draw: Any, log: _Log, run_id: str, call_id: str) -> None:
    """A backend call: maybe a permission round, then started / output / finished."""
    allowed = True
    if draw(st.booleans()):
        log.add(
            draw,
            ev.PermissionRequested,
            run_id,
            call_id=call_id,
            tool_name="f",
            options=draw(_options),
        )
        outcome = draw(_outcomes)
        log.add(
            draw,
            ev.PermissionResolved,
            run_id,
            call_id=call_id,
            tool_name="f",
            outcome=outcome,
            option_id=None if outcome == "cancelled" else outcome,
        )
        allowed = outcome.startswith("allow")
    if allowed:
        sandbox = draw(_sandboxes)
        log.add(draw, ev.ToolStarted, run_id, call_id=call_id, sandbox=sandbox)
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            log.add(
                draw,
                ev.ToolOutput,
                run_id,
                call_id=call_id,
                content=tuple(draw(_outputs)),
            )
        if draw(st.booleans()):
            log.add(draw, ev.PlanUpdated, run_id, entries=draw(_plan))
    status = draw(_statuses) if allowed else "failed"
    error = None if status == "completed" else ToolError(code=draw(_ident), message=draw(_short))
    log.add(
        draw,
        ev.ToolFinished,
        run_id,
        call_id=call_id,
        status=status,
        content=tuple(draw(_results)),
        raw_output_json=draw(_raw_outputs),
        error=error,
    )


def _state(draw: Any, log: _Log, run_id: str) -> None:
    if draw(st.booleans()):
        value = draw(_json_objects)
        log.state_keys = list(value)
        log.add(draw, ev.StateSnapshot, run_id, state_json=canonical_json(value))
    elif log.state_keys or draw(st.booleans()):
        key = draw(_ident)
        op = "replace" if key in log.state_keys else "add"
        log.state_keys.append(key)
        patch: JsonValue = [{"op": op, "path": f"/{key}", "value": draw(json_values)}]
        log.add(draw, ev.StateDelta, run_id, patch_json=canonical_json(patch))


def _streamed_compaction(draw: Any, log: _Log, run_id: str) -> None:
    """A summarize pass: its start, zero to three pieces of summary, then the compaction
    (applied) or its drop."""
    compaction_id = "compaction_" + draw(_ident)
    trigger = draw(_summary_triggers)
    log.add(draw, ev.CompactionStarted, run_id, compaction_id=compaction_id, trigger=trigger)
    pieces = draw(_summary_pieces)
    for piece in pieces:
        log.add(draw, ev.CompactionSummaryDelta, run_id, compaction_id=compaction_id, delta=piece)
    if draw(st.booleans()):
        log.add(
            draw,
            ev.Compaction,
            run_id,
            summary="".join(pieces) if draw(st.booleans()) else draw(_short),
            through_seq=len(log.events),
            trigger=trigger,
            pre_tokens=draw(_count),
            post_tokens=draw(_count),
            fallback=draw(st.booleans()),
            notice=draw(_maybe_empty),
            turns=draw(st.integers(min_value=0, max_value=5)),
            compaction_id=compaction_id,
        )
    else:
        log.add(
            draw,
            ev.CompactionDropped,
            run_id,
            compaction_id=compaction_id,
            reason=draw(_drop_reasons),
            detail=draw(_short),
        )


def _control(draw: Any, log: _Log, run_id: str) -> None:
    choice = draw(st.integers(min_value=0, max_value=5))
    if choice == 5:
        _streamed_compaction(draw, log, run_id)
    elif choice == 4:
        log.add(
            draw,
            ev.Notice,
            run_id,
            severity=draw(_severities),
            title=draw(_ident),
            description=draw(_maybe_short),
        )
    elif choice == 0:
        log.add(
            draw,
            ev.HookAction,
            run_id,
            hook=draw(_ident),
            action=draw(_ident),
            detail=draw(_short),
            call_id=draw(_maybe_ident),
            message=draw(_maybe_empty),
        )
    elif choice == 1:
        log.add(draw, ev.SoftTimeout, run_id, elapsed_ms=draw(_count), limit_ms=draw(_count))
    elif choice == 2:
        log.add(
            draw,
            ev.Compaction,
            run_id,
            summary=draw(_short),
            through_seq=len(log.events),
            trigger=draw(_triggers),
            scope=draw(_scopes),
            pre_tokens=draw(_count),
            post_tokens=draw(_count),
            fallback=draw(st.booleans()),
            notice=draw(_short),
        )
    else:
        log.add(
            draw, ev.BudgetExhausted, run_id, budget="steps", limit=draw(_count), used=draw(_count)
        )


def _session_level(draw: Any, log: _Log) -> None:
    choice = draw(st.integers(min_value=0, max_value=3))
    if choice == 0:
        log.add(draw, ev.ModeChanged, "", mode_id=draw(_modes))
    elif choice == 1:
        log.add(
            draw,
            ev.ConfigChanged,
            "",
            option_id="model",
            value=draw(_models),
        )
    elif choice == 2:
        commands = draw(_commands)
        log.add(draw, ev.CommandsUpdated, "", commands=tuple(commands))
    else:
        log.add(draw, ev.SessionInfo, "", title=draw(_maybe_short))


def _run(draw: Any, log: _Log, number: int, waiting: list[str]) -> list[str]:
    """One run; `waiting` are calls an earlier run left to the client (answered first)."""
    run_id = f"run-{number}"
    prefix = f"r{number}"
    log.add(
        draw,
        ev.RunStarted,
        run_id,
        model="scripted:x",
        parent_run_id=draw(st.none() | st.just(f"run-{number - 1}")) if number else None,
        trace_id=draw(st.none() | st.just(f"{number + 1:032x}")),
    )
    for call_id in waiting:
        log.add(
            draw,
            ev.ToolFinished,
            run_id,
            call_id=call_id,
            status="completed",
            content=tuple(draw(_answers)),
        )
    if draw(st.booleans()):
        _state(draw, log, run_id)
    log.add(
        draw,
        ev.UserMessage,
        run_id,
        message_id=f"{prefix}-user",
        content=tuple(draw(_some_parts)),
    )
    if draw(st.booleans()):
        log.add(draw, ev.SessionInfo, run_id, title=draw(_short))
    pending: list[str] = []
    steps = draw(st.integers(min_value=1, max_value=3))
    for step in range(1, steps + 1):
        pending = _step(draw, log, run_id, step, f"{prefix}s{step}")
        if draw(st.booleans()):
            _state(draw, log, run_id)
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            _control(draw, log, run_id)
        if pending:
            break
        if step < steps and draw(st.integers(min_value=0, max_value=3)) == 0:
            log.add(
                draw,
                ev.FollowUpApplied,
                run_id,
                message_id=f"{prefix}s{step}-follow",
                content=(TextPart(text=draw(_short)),),
            )
    if not pending and draw(st.integers(min_value=0, max_value=4)) == 0:
        log.add(draw, ev.RunFailed, run_id, code=draw(_ident), message=draw(_short))
        return []
    interrupts: tuple[Interrupt, ...] = ()
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        interrupts = (
            Interrupt(
                id=f"approval-{prefix}",
                reason=draw(_short),
                tool_call_id=None,
                response_schema_json=draw(_maybe_schema),
            ),
        )
    stop = "interrupted" if pending or interrupts else draw(_run_stops)
    log.add(
        draw,
        ev.RunFinished,
        run_id,
        stop_reason=stop,
        usage=draw(_usage),
        pending_tool_call_ids=tuple(pending),
        interrupts=interrupts,
    )
    return pending


@st.composite
def sessions(draw: Any, max_runs: int = 2) -> list[LoopEvent]:
    """One session's events: session-level events and 1..max_runs complete runs."""
    log = _Log(session_id=draw(_session_ids))
    waiting: list[str] = []
    for number in range(draw(st.integers(min_value=1, max_value=max_runs))):
        if draw(st.integers(min_value=0, max_value=2)) == 0:
            _session_level(draw, log)
        waiting = _run(draw, log, number, waiting)
    return log.events
