"""The history the log keeps as events arrive equals the fold of the whole log from scratch.

`projection.History` is a cache of the log: fed one event at a time and read at any point in
between, it must give the messages (and the compactor the cut) that folding every event
from the first one gives — over random event sequences with compactions of both scopes,
tool calls left open, unknown kinds and events of every kind in between. The fold from
scratch and the compactor's plan are written out here as they were before the projection
became incremental (a scan of every event), so the two are checked against each other, not
against themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.compaction import CompactionSettings, Compactor, _Plan
from steerable_bridge.runtime.model_context.projection import (
    _NO_HISTORY,
    _OWN_MESSAGE,
    History,
    ProjectionError,
    _Assistant,
    _compact,
    _own_message,
    history_entries,
)
from steerable_bridge.runtime.model_context.tokens import estimate_message_tokens
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.values import Message, TextPart
from tests.lanes import examples
from tests.runtime.strategies import for_dataclass


def scratch_entries(events: Sequence[ev.LoopEvent]) -> list[tuple[int, Message]]:
    """The history folded from the first event (the fold before it was incremental)."""
    messages: list[tuple[int, Message]] = []
    current: _Assistant | None = None
    start = 0

    def flush() -> None:
        nonlocal current
        if current is not None and (
            current.text or current.calls or current.reasoning or current.thinking
        ):
            messages.append((start, current.message()))
        current = None

    def begin(message_id: str, seq: int) -> _Assistant:
        nonlocal current, start
        if current is None:
            current = _Assistant(message_id)
            start = seq
        return current

    for event in events:
        if isinstance(event, ev.TextDelta):
            begin(event.message_id, event.seq).text.append(event.delta)
        elif isinstance(event, ev.ReasoningDelta):
            assistant = begin(event.message_id, event.seq)
            assistant.reasoning.append(event.delta)
            assistant.block.append(event.delta)
        elif isinstance(event, ev.ReasoningEnd):
            begin(event.message_id, event.seq).end_reasoning(event)
        elif isinstance(event, ev.ToolCallEnd):
            from steerable_bridge.runtime.values import ToolCall

            begin(f"asst-{event.call_id}", event.seq).calls.append(
                ToolCall(
                    call_id=event.call_id, name=event.name, arguments_json=event.arguments_json
                )
            )
        elif isinstance(event, ev.ModelResponseEvent | ev.RunFinished | ev.RunFailed):
            flush()
        elif isinstance(event, _OWN_MESSAGE):
            flush()
            messages.append((event.seq, _own_message(event)))
        elif isinstance(event, ev.HookAction):
            if event.message:
                flush()
                messages.append((event.seq, _own_message(event)))
        elif isinstance(event, ev.Compaction):
            flush()
            messages = _compact(messages, event)
        elif isinstance(event, _NO_HISTORY):
            continue
        else:
            raise ProjectionError(f"cannot project {event.kind!r}")
    flush()
    return messages


_BOUNDARIES = (ev.UserMessage, ev.SteerApplied, ev.FollowUpApplied, ev.StepStarted, ev.RunStarted)


def scratch_plan(events: Sequence[ev.LoopEvent], budget: int) -> _Plan | None:
    """The compactor's cut planned by scanning every event (as it did before)."""
    floor = -1
    for event in events:
        if isinstance(event, ev.Compaction) and event.scope == "history":
            floor = max(floor, event.through_seq)
    cuts: list[tuple[int, bool]] = []
    open_calls: set[str] = set()
    for event in events:
        if isinstance(event, _BOUNDARIES) and not open_calls and event.seq - 1 > floor:
            cuts.append((event.seq - 1, not isinstance(event, ev.StepStarted)))
        if isinstance(event, ev.ToolCallEnd):
            open_calls.add(event.call_id)
        elif isinstance(event, ev.ToolFinished):
            open_calls.discard(event.call_id)
    if events and not open_calls and events[-1].seq > floor:
        cuts.append((events[-1].seq, True))
    entries = scratch_entries(events)
    useful = [(cut, turn) for cut, turn in cuts if any(floor < seq <= cut for seq, _ in entries)]

    def fits(cut: int) -> bool:
        return sum(estimate_message_tokens(m) for seq, m in entries if seq > cut) <= budget

    chosen = next((cut for cut, turn in useful if turn and fits(cut)), None)
    if chosen is None:
        chosen = next((cut for cut, _ in useful if fits(cut)), None)
    if chosen is None and useful:
        chosen = useful[-1][0]
    if chosen is None:
        return None
    return _Plan(
        through=chosen,
        floor=floor,
        folded=tuple(m for seq, m in entries if seq <= chosen),
        kept=tuple(m for seq, m in entries if seq > chosen),
    )


def scratch_turns(events: Sequence[ev.LoopEvent], floor: int, through: int) -> int:
    return sum(isinstance(e, ev.UserMessage) and floor < e.seq <= through for e in events)


# -- random logs ----------------------------------------------------------------------------

_ids = st.sampled_from(["m1", "m2"])
_calls = st.sampled_from(["c1", "c2", "c3"])
_words = st.text(alphabet="ab ", max_size=6)
_content = st.lists(_words.map(lambda t: TextPart(text=t)), min_size=0, max_size=2).map(tuple)

Step = tuple[str, dict[str, Any]]

_STEPS: st.SearchStrategy[Step] = st.one_of(
    st.tuples(st.just("user"), st.fixed_dictionaries({"message_id": _ids, "content": _content})),
    st.tuples(st.just("steer"), st.fixed_dictionaries({"message_id": _ids, "content": _content})),
    st.tuples(st.just("run"), st.just({})),
    st.tuples(st.just("step"), st.just({})),
    st.tuples(st.just("text"), st.fixed_dictionaries({"message_id": _ids, "delta": _words})),
    st.tuples(st.just("text"), st.fixed_dictionaries({"message_id": _ids, "delta": _words})),
    st.tuples(st.just("think"), st.fixed_dictionaries({"message_id": _ids, "delta": _words})),
    st.tuples(
        st.just("seal"),
        st.fixed_dictionaries({"message_id": _ids, "signature": st.none() | st.just("sig")}),
    ),
    st.tuples(st.just("call"), st.fixed_dictionaries({"call_id": _calls, "name": _words})),
    st.tuples(
        st.just("result"),
        st.fixed_dictionaries(
            {
                "call_id": _calls,
                "content": _content,
                "status": st.sampled_from(["completed", "failed"]),
            }
        ),
    ),
    st.tuples(st.just("response"), st.just({})),
    st.tuples(st.just("finish"), st.just({})),
    st.tuples(st.just("hook"), st.fixed_dictionaries({"message": _words})),
    st.tuples(
        st.just("compact"),
        st.fixed_dictionaries(
            {
                "back": st.integers(min_value=-2, max_value=25),
                "scope": st.sampled_from(["history", "history", "tool_results"]),
                "notice": st.sampled_from(["", "paused"]),
                "summary": _words,
            }
        ),
    ),
    st.tuples(
        st.just("any"),
        st.fixed_dictionaries({"event": st.one_of([for_dataclass(cls) for cls in ev.EVENT_TYPES])}),
    ),
)


def build(steps: Sequence[Step]) -> list[ev.LoopEvent]:
    """The events the steps describe, seqs 0, 1, 2, ... in order."""
    out: list[ev.LoopEvent] = []
    for seq, (kind, f) in enumerate(steps):
        base: dict[str, Any] = {"session_id": "s", "run_id": "r", "seq": seq, "ts": 0}
        event: ev.LoopEvent
        if kind == "user":
            event = ev.UserMessage(**base, **f)
        elif kind == "steer":
            event = ev.SteerApplied(**base, **f)
        elif kind == "run":
            event = ev.RunStarted(**base, model="m")
        elif kind == "step":
            event = ev.StepStarted(**base, step=seq)
        elif kind == "text":
            event = ev.TextDelta(**base, **f)
        elif kind == "think":
            event = ev.ReasoningDelta(**base, **f)
        elif kind == "seal":
            event = ev.ReasoningEnd(**base, **f)
        elif kind == "call":
            event = ev.ToolCallEnd(**base, arguments_json="{}", **f)
        elif kind == "result":
            event = ev.ToolFinished(**base, **f)
        elif kind == "response":
            event = ev.ModelResponseEvent(**base, step=0, finish_reason="stop")
        elif kind == "finish":
            event = ev.RunFinished(**base, stop_reason="end_turn")
        elif kind == "hook":
            event = ev.HookAction(**base, hook="h", action="a", **f)
        elif kind == "compact":
            scope: Literal["history", "tool_results"] = f["scope"]
            event = ev.Compaction(
                **base,
                summary=f["summary"],
                through_seq=max(-1, seq - f["back"]),
                scope=scope,
                notice=f["notice"],
            )
        else:
            event = dataclasses.replace(f["event"], session_id="s", seq=seq)
        out.append(event)
    return out


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.tuples(_STEPS, st.booleans()), max_size=40),
    st.integers(min_value=0, max_value=60),
)
def test_the_history_kept_as_events_arrive_equals_the_fold_from_scratch(
    steps: list[tuple[Step, bool]], budget: int
) -> None:
    events = build([step for step, _ in steps])
    history = History()
    compactor = Compactor(CompactionSettings())
    for i, (event, look) in enumerate(zip(events, (look for _, look in steps), strict=True)):
        history.observe(event)
        if not look and i != len(events) - 1:
            continue  # read only now and then: what is read must not change what comes
        prefix = events[: i + 1]
        try:
            expected = scratch_entries(prefix)
        except ProjectionError:
            with pytest.raises(ProjectionError):
                history.entries()
            with pytest.raises(ProjectionError):
                history.messages()
            return
        assert list(history.entries()) == expected
        assert history.messages() == tuple(m for _, m in expected)
        assert history_entries(prefix) == expected
        plan = compactor._plan(history, budget=budget)
        assert plan == scratch_plan(prefix, budget)
        if plan is not None:
            assert history.turns(plan.floor, plan.through) == scratch_turns(
                prefix, plan.floor, plan.through
            )


def test_the_history_tuple_is_the_same_object_until_an_event_changes_it() -> None:
    log = SessionLog("s")
    log.record(ev.UserMessage, "r", message_id="u1", content=(TextPart(text="hi"),))
    first = log.history.messages()
    log.record(ev.StepStarted, "r", step=1)
    assert log.history.messages() is first  # nothing the model sees changed
    log.record(ev.TextDelta, "r", message_id="a", delta="hel")
    log.record(ev.TextDelta, "r", message_id="a", delta="lo")
    log.record(ev.ModelResponseEvent, "r", step=1, finish_reason="stop")
    after = log.history.messages()
    assert [m.text for m in after] == ["hi", "hello"]
    assert after[0] is first[0]  # the messages before are shared, not rebuilt


def test_a_log_loaded_from_a_tail_and_one_adopting_events_keep_the_same_history() -> None:
    whole = SessionLog("s")
    whole.record(ev.UserMessage, "r", message_id="u1", content=(TextPart(text="old"),))
    whole.record(ev.Compaction, "r", summary="they said old", through_seq=0)
    whole.record(ev.UserMessage, "r", message_id="u2", content=(TextPart(text="new"),))
    events = list(whole.view())
    tail = SessionLog("s", events[1:])  # loaded from the compaction on
    assert tail.history.messages() == whole.history.messages()
    adopting = SessionLog("s", events[:1])
    adopting.adopt(events[1:])
    assert adopting.history.messages() == whole.history.messages()
    assert [m.text for m in whole.history.messages()][1:] == ["new"]
