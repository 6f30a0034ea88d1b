"""`close_interrupted_run` (`runtime/session_log/recovery.py`): a log a crash left inside a
run is closed by appending what a clean end would have logged — a failed `compaction_dropped` for a
compaction that never ended, ends for open reasoning and text, `tool_call_end` with the
streamed arguments for a half-streamed call, a `cancelled` result (code `interrupted`) for
every call without one, `step_finished`, and one `run_failed` (code `interrupted`) that says
what to do — never by rewriting what is there; a closed log gets nothing, and closing twice
adds nothing the second time."""

from __future__ import annotations

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import SessionFacts, project_history
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.session_log.recovery import close_interrupted_run
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import assert_well_formed, kinds


class Crashed:
    """A session log written up to a crash, with the facts folded from it."""

    def __init__(self) -> None:
        self.log = SessionLog("s1")
        self.facts = SessionFacts()

    def add(self, cls: type[ev.EventBase], run_id: str = "r1", **fields: object) -> None:
        event: ev.LoopEvent = self.log.record(cls, run_id, **fields)  # type: ignore[assignment]
        self.facts.observe(event)

    def start(self, run_id: str = "r1") -> None:
        self.add(ev.RunStarted, run_id, model="test:m")
        self.add(ev.StepStarted, run_id, step=1)

    def close(self) -> list[ev.LoopEvent]:
        return close_interrupted_run(self.log, self.facts)

    def run(self, run_id: str = "r1") -> list[ev.LoopEvent]:
        return [e for e in self.log.view() if e.run_id == run_id]


def test_a_log_without_an_open_run_gets_nothing() -> None:
    empty = Crashed()
    assert empty.close() == [] and len(empty.log) == 0
    done = Crashed()
    done.start()
    done.add(ev.StepFinished, step=1, finish_reason="end_turn")
    done.add(ev.RunFinished, stop_reason="end_turn")
    before = len(done.log)
    assert done.close() == [] and len(done.log) == before


def test_open_text_reasoning_and_step_are_closed_and_the_run_fails_interrupted() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.ReasoningStart, message_id="m0")
    crashed.add(ev.TextStart, message_id="m1")
    crashed.add(ev.TextDelta, message_id="m1", delta="Half an ans")
    added = crashed.close()
    assert kinds(added) == ["reasoning_end", "text_end", "step_finished", "run_failed"]
    step_end, failed = added[-2], added[-1]
    assert isinstance(step_end, ev.StepFinished) and step_end.finish_reason == "error"
    assert isinstance(failed, ev.RunFailed) and failed.code == "interrupted"
    assert "Send the prompt again" in failed.message
    assert all(e.run_id == "r1" for e in added)
    assert not crashed.facts.running
    assert_well_formed(crashed.run())
    assistant = project_history(crashed.log.view())[-1]
    assert assistant.content == (TextPart(text="Half an ans"),)  # what streamed is kept


def test_a_half_streamed_call_is_ended_with_its_arguments_and_cancelled() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.ToolCallStart, call_id="c1", name="write", parent_message_id="m1")
    crashed.add(ev.ToolCallDelta, call_id="c1", delta='{"path": ')
    crashed.add(ev.ToolCallDelta, call_id="c1", delta='"a.py"}')
    added = crashed.close()
    assert kinds(added) == ["tool_call_end", "tool_finished", "step_finished", "run_failed"]
    end, result = added[0], added[1]
    assert isinstance(end, ev.ToolCallEnd)
    assert (end.call_id, end.name, end.arguments_json) == ("c1", "write", '{"path": "a.py"}')
    assert isinstance(result, ev.ToolFinished) and result.status == "cancelled"
    assert result.error is not None and result.error.code == "interrupted"
    assert crashed.facts.open_calls == {}
    assert_well_formed(crashed.run())


def test_a_call_that_started_but_never_finished_gets_a_cancelled_result() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.ToolCallStart, call_id="c1", name="run", parent_message_id="m1")
    crashed.add(ev.ToolCallEnd, call_id="c1", name="run", arguments_json="{}")
    crashed.add(ev.ToolCallStart, call_id="c2", name="run", parent_message_id="m1")
    crashed.add(ev.ToolCallEnd, call_id="c2", name="run", arguments_json="{}")
    crashed.add(ev.ToolStarted, call_id="c1")
    crashed.add(ev.ToolFinished, call_id="c1", status="completed")
    crashed.add(ev.ToolStarted, call_id="c2")
    added = crashed.close()
    results = [e for e in added if isinstance(e, ev.ToolFinished)]
    assert [r.call_id for r in results] == ["c2"]  # c1 has its result already
    assert_well_formed(crashed.run())


def test_a_compaction_cut_short_is_dropped_and_an_ended_one_is_left_alone() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.CompactionStarted, compaction_id="k1")
    crashed.add(ev.CompactionDropped, compaction_id="k1", reason="failed", detail="x")
    crashed.add(ev.CompactionStarted, compaction_id="k2")
    added = crashed.close()
    assert kinds(added)[0] == "compaction_dropped"
    dropped = added[0]
    assert isinstance(dropped, ev.CompactionDropped)
    assert dropped.compaction_id == "k2" and dropped.reason == "failed"
    assert "unchanged" in (dropped.detail or "")
    assert len([e for e in added if isinstance(e, ev.CompactionDropped)]) == 1


def test_only_the_last_run_is_closed_and_earlier_ones_are_not_touched() -> None:
    crashed = Crashed()
    crashed.start("r1")
    crashed.add(ev.TextStart, "r1", message_id="m1")
    crashed.add(ev.TextEnd, "r1", message_id="m1")
    crashed.add(ev.StepFinished, "r1", step=1, finish_reason="end_turn")
    crashed.add(ev.RunFinished, "r1", stop_reason="end_turn")
    before = list(crashed.log.view())
    crashed.start("r2")
    crashed.add(ev.TextStart, "r2", message_id="m2")
    added = crashed.close()
    assert all(e.run_id == "r2" for e in added)
    assert list(crashed.log.view())[: len(before)] == before  # appended, never rewritten
    assert kinds(added) == ["text_end", "step_finished", "run_failed"]


def test_closing_twice_adds_nothing_the_second_time() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.TextStart, message_id="m1")
    assert crashed.close()
    before = len(crashed.log)
    assert crashed.close() == [] and len(crashed.log) == before


def test_a_run_that_died_between_steps_fails_without_a_step_end() -> None:
    crashed = Crashed()
    crashed.start()
    crashed.add(ev.StepFinished, step=1, finish_reason="tool_calls")
    assert kinds(crashed.close()) == ["run_failed"]
