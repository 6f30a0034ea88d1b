"""The tool gate (`runtime/tool_calls/gate.py`): `OpenGate` lets every call and result through
unchanged; `TurnGate` asks the turn's quality guards first (an answer from them means no
hook is consulted), then the `before_tool` hooks — a veto becomes a failed `vetoed` result
that says why, rewritten arguments a copy of the call with only its arguments changed —
sends results through the `after_tool` hooks, and tells the guards when results are logged
(`settled`), which is when the error breaker trips. The same rules in whole turns are in
`test_hooks.py` and `test_quality.py`."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_quality.quality import TurnGuard
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings
from steerable_bridge.runtime.ports.tools import ToolResult
from steerable_bridge.runtime.tool_calls.gate import OpenGate, TurnGate
from steerable_bridge.runtime.turns.hooks import Hook, HookContext, HookRunner, Rewrite, Veto
from steerable_bridge.runtime.values import TextPart, ToolCall

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

CALL = ev.ToolCallEnd(
    session_id="s1",
    run_id="r1",
    seq=3,
    ts=1,
    call_id="c1",
    name="write",
    arguments_json='{"path":"a.py"}',
    tool_kind="edit",
    title="Write a.py",
)
RESULT = ToolResult(content=(TextPart(text="written"),))


class Recorder:
    """An `Emit` that keeps what it was asked to log."""

    def __init__(self) -> None:
        self.logged: list[tuple[type[ev.EventBase], dict[str, Any]]] = []

    async def __call__(self, cls: type[Any], /, **fields: Any) -> Any:
        self.logged.append((cls, fields))
        return None

    def actions(self) -> list[tuple[str, str]]:
        return [(f["hook"], f["action"]) for cls, f in self.logged if cls is ev.HookAction]


def gate(*hooks: Hook, emit: Recorder | None = None, **quality: Any) -> tuple[TurnGate, Recorder]:
    emit = emit or Recorder()
    guard = TurnGuard(
        settings=QualitySettings(mode="on", **quality),
        active=True,
        emit=emit,
        model="test:m",
        max_steps=10,
    )
    context = HookContext(session_id="s1", run_id="r1", step=1, model="test:m", cwd="/w")
    return TurnGate(guard, HookRunner(hooks, emit, lambda: context)), emit


async def test_the_open_gate_changes_nothing() -> None:
    open_gate = OpenGate()
    assert await open_gate.admit(CALL) is CALL
    assert await open_gate.review(CALL, RESULT) is RESULT
    assert open_gate.settled() is None


async def test_without_hooks_or_guard_answers_the_call_is_admitted_as_it_is() -> None:
    turn_gate, emit = gate()
    assert await turn_gate.admit(CALL) is CALL
    assert await turn_gate.review(CALL, RESULT) is RESULT
    assert emit.logged == []


async def test_a_veto_is_a_failed_result_that_says_why() -> None:
    seen: list[ToolCall] = []

    def veto(call: ToolCall, ctx: HookContext) -> Veto:
        seen.append(call)
        return Veto("writes are frozen")

    turn_gate, emit = gate(Hook(name="freeze", before_tool=veto))
    answer = await turn_gate.admit(CALL)
    assert isinstance(answer, ToolResult) and answer.error is not None
    assert answer.error.code == "vetoed"
    assert answer.error.message == "the call was vetoed and did not run: writes are frozen"
    assert answer.content == (TextPart(text=answer.error.message),)
    assert seen == [ToolCall(call_id="c1", name="write", arguments_json='{"path":"a.py"}')]
    assert emit.actions() == [("freeze", "veto")]


async def test_rewritten_arguments_change_only_the_arguments() -> None:
    def move(call: ToolCall, ctx: HookContext) -> Rewrite:
        return Rewrite({"path": "b.py"}, "kept out of a.py")

    turn_gate, emit = gate(Hook(name="mover", before_tool=move))
    admitted = await turn_gate.admit(CALL)
    assert isinstance(admitted, ev.ToolCallEnd)
    assert admitted.arguments_json == '{"path":"b.py"}'
    assert (admitted.call_id, admitted.title, admitted.tool_kind, admitted.seq) == (
        "c1", "Write a.py", "edit", 3,
    )  # fmt: skip
    assert emit.actions() == [("mover", "rewrite_arguments")]


async def test_a_rewrite_to_the_same_arguments_keeps_the_call() -> None:
    def same(call: ToolCall, ctx: HookContext) -> Rewrite:
        return Rewrite({"path": "a.py"})

    turn_gate, emit = gate(Hook(name="noop", before_tool=same))
    assert await turn_gate.admit(CALL) is CALL
    assert emit.actions() == []


async def test_a_guard_answer_comes_first_and_the_hooks_are_not_asked() -> None:
    asked: list[str] = []

    def record(call: ToolCall, ctx: HookContext) -> None:
        asked.append(call.call_id)

    turn_gate, emit = gate(Hook(name="watch", before_tool=record), max_tool_calls=0)
    answer = await turn_gate.admit(CALL)
    assert isinstance(answer, ToolResult) and answer.error is not None
    assert answer.error.code == "budget_exhausted"
    assert asked == [] and emit.actions() == [("budget", "skip")]


async def test_results_pass_through_the_after_tool_hooks() -> None:
    def shorten(call: ToolCall, result: ToolResult, ctx: HookContext) -> ToolResult:
        return ToolResult(content=(TextPart(text="ok"),))

    turn_gate, emit = gate(Hook(name="short", after_tool=shorten))
    assert await turn_gate.review(CALL, RESULT) == ToolResult(content=(TextPart(text="ok"),))
    assert emit.actions() == [("short", "rewrite_result")]


async def test_the_error_breaker_trips_only_once_results_are_settled() -> None:
    turn_gate, emit = gate(error_breaker=2)
    turn_gate.guard.consecutive_errors = 2  # two failed results were just logged
    assert await turn_gate.admit(CALL) is CALL  # not settled yet: the breaker waits
    turn_gate.settled()
    answer = await turn_gate.admit(CALL)
    assert isinstance(answer, ToolResult) and answer.error is not None
    assert answer.error.code == "breaker_skipped"
    assert emit.actions() == [("breaker", "skip")]
