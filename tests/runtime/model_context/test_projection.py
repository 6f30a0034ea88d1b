"""Model history and session facts are deterministic projections of the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import (
    ProjectionError,
    project_history,
    project_state,
    session_facts,
)
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.values import TextPart, ToolCall, ToolError, canonical_json
from tests.lanes import examples
from tests.runtime.strategies import events


def conversation() -> SessionLog:
    """A realistic two-run log: text, reasoning, a tool call and its result, a steer."""
    log = SessionLog("s")

    def rec(cls: type[ev.EventBase], run: str = "r1", **fields: Any) -> None:
        log.record(cls, run, **fields)

    rec(ev.RunStarted, model="demo:default")
    rec(ev.UserMessage, message_id="u1", content=(TextPart(text="read a.py"),))
    rec(ev.SessionInfo, title="read a.py")
    rec(ev.StepStarted, step=1)
    rec(ev.ReasoningStart, message_id="t1")
    rec(ev.ReasoningDelta, message_id="t1", delta="need ")
    rec(ev.ReasoningDelta, message_id="t1", delta="the file")
    rec(ev.ReasoningEnd, message_id="t1")
    rec(ev.TextStart, message_id="a1")
    rec(ev.TextDelta, message_id="a1", delta="Read")
    rec(ev.TextDelta, message_id="a1", delta="ing.")
    rec(ev.TextEnd, message_id="a1")
    rec(ev.ToolCallStart, call_id="c1", name="read_file", parent_message_id="a1")
    rec(ev.ToolCallDelta, call_id="c1", delta='{"path":"a.py"}')
    rec(ev.ToolCallEnd, call_id="c1", name="read_file", arguments_json='{"path":"a.py"}')
    rec(ev.ModelResponseEvent, step=1, finish_reason="tool_calls")
    rec(ev.ToolStarted, call_id="c1")
    rec(ev.ToolFinished, call_id="c1", status="completed", content=(TextPart(text="x = 1"),))
    rec(ev.StepFinished, step=1, finish_reason="tool_calls")
    rec(ev.SteerApplied, message_id="u2", content=(TextPart(text="be brief"),))
    rec(ev.StateSnapshot, state_json=canonical_json({"count": 1}))
    rec(ev.StateDelta, patch_json=canonical_json([{"op": "replace", "path": "/count", "value": 2}]))
    rec(ev.RunFinished, stop_reason="end_turn")
    rec(ev.RunStarted, "r2", model="demo:default")
    rec(ev.UserMessage, "r2", message_id="u3", content=(TextPart(text="again"),))
    rec(ev.ToolCallEnd, "r2", call_id="c2", name="write", arguments_json="{}")
    rec(
        ev.ToolFinished,
        "r2",
        call_id="c2",
        status="failed",
        error=ToolError(code="x", message="no"),
    )
    rec(ev.PermissionResolved, "r2", call_id="c3", tool_name="write", outcome="reject_always")
    rec(ev.ModeChanged, "r2", mode_id="read-only")
    rec(ev.ToolCallEnd, "r2", call_id="c4", name="ask_user", arguments_json="{}")
    return log


def test_history_is_rebuilt_from_the_log() -> None:
    messages = project_history(conversation().view())
    assert [(m.role, m.text) for m in messages] == [
        ("user", "read a.py"),
        ("assistant", "Reading."),
        ("tool", "x = 1"),
        ("user", "be brief"),
        ("user", "again"),
        ("assistant", ""),
        ("tool", "error [x]: no"),
        ("assistant", ""),
    ]
    assistant = messages[1]
    assert assistant.reasoning == "need the file"
    assert assistant.tool_calls == (
        ToolCall(call_id="c1", name="read_file", arguments_json='{"path":"a.py"}'),
    )
    assert messages[2].tool_call_id == "c1" and not messages[2].is_error
    assert messages[6].is_error
    assert messages[7].tool_calls[0].call_id == "c4"


def test_projection_is_deterministic() -> None:
    first = project_history(conversation().view())
    second = project_history(conversation().view())
    assert first == second
    assert project_history(list(conversation().view())) == first


def test_compaction_replaces_earlier_history_with_its_summary() -> None:
    log = conversation()
    log.record(ev.Compaction, "r3", summary="They read a.py.", through_seq=log.next_seq - 1)
    log.record(ev.UserMessage, "r3", message_id="u9", content=(TextPart(text="next"),))
    messages = project_history(log.view())
    assert [m.role for m in messages] == ["user", "user"]
    assert "They read a.py." in messages[0].text and messages[1].text == "next"


@dataclass(frozen=True, slots=True, kw_only=True)
class FutureEvent(ev.EventBase):
    kind: Literal["from_the_future"] = "from_the_future"


def test_an_unknown_event_fails_loudly() -> None:
    events = [*conversation().view(), FutureEvent(session_id="s", run_id="r", seq=99, ts=0)]
    with pytest.raises(ProjectionError, match=r"from_the_future.*seq 99.*upgrade"):
        project_history(events)  # type: ignore[arg-type]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(events(), max_size=8))
def test_every_known_kind_projects(log: list[ev.LoopEvent]) -> None:
    assert project_history(log) == project_history(log)


def test_session_facts_fold_title_mode_permissions_state_and_open_calls() -> None:
    facts = session_facts(conversation().view())
    assert facts.title == "read a.py"
    assert facts.mode_id == "read-only"
    assert facts.always == {"write": False}
    assert list(facts.open_calls) == ["c4"]
    assert facts.running is True and facts.last_run_id == "r2"
    assert facts.state == {"count": 2}
    assert project_state(conversation().view()) == {"count": 2}
