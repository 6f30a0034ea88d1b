"""The deterministic digest (`runtime/model_context/digest.py`): from the events a
compaction folds (seq in `(floor, through]`) it writes what the user asked, the files tools
touched (from locations, path-like arguments and diffs), the tools run with their failures, the
assistant's last statements and the plan's open entries — each bounded — plus the earlier
summary when the range follows one. Nothing outside the range leaks in except the plan,
which outlives compaction; the same events always give the same text."""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.digest import digest
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.values import DiffContent, Location, PlanEntry, TextPart

HEAD = "(Deterministic digest: the model's summary was not available.)"


class Events:
    """A session log written event by event; each helper returns the seq it ended at."""

    def __init__(self) -> None:
        self.log = SessionLog("s1")

    def add(self, cls: type[ev.EventBase], **fields: Any) -> int:
        return self.log.record(cls, "r1", **fields).seq

    def ask(self, text: str) -> int:
        return self.add(
            ev.UserMessage, message_id=f"u{len(self.log)}", content=(TextPart(text=text),)
        )

    def say(self, text: str) -> int:
        mid = f"a{len(self.log)}"
        self.add(ev.TextStart, message_id=mid)
        for word in text.split(" "):
            self.add(ev.TextDelta, message_id=mid, delta=word + " ")
        return self.add(ev.TextEnd, message_id=mid)

    def tool(
        self,
        call_id: str,
        name: str,
        arguments: str = "{}",
        status: str = "completed",
        locations: tuple[Location, ...] = (),
        **finished: Any,
    ) -> int:
        self.add(
            ev.ToolCallEnd,
            call_id=call_id,
            name=name,
            arguments_json=arguments,
            locations=locations,
        )
        return self.add(ev.ToolFinished, call_id=call_id, status=status, **finished)

    def digest(self, floor: int = -1, through: int | None = None) -> str:
        events = list(self.log.view())
        return digest(events, floor=floor, through=events[-1].seq if through is None else through)


def test_an_empty_range_is_only_the_heading() -> None:
    assert digest([], floor=-1, through=10) == HEAD


def test_requests_tools_files_and_statements_are_all_there_in_order() -> None:
    events = Events()
    events.ask("Fix the failing test in tests/test_a.py")
    events.tool("c1", "read_file", '{"path": "tests/test_a.py"}')
    events.tool("c2", "run", '{"command": "pytest"}', status="failed")
    events.tool("c3", "run", '{"command": "pytest"}')
    diff = DiffContent(path="a.py", old_text="x", new_text="y")
    events.tool("c4", "edit", locations=(Location(path="b.py"),), content=(diff,))
    events.say("I changed a.py so the test passes.")
    assert events.digest() == "\n".join([
        HEAD,
        "",
        "The user asked:",
        "- Fix the failing test in tests/test_a.py",
        "",
        "Files touched: tests/test_a.py, b.py, a.py",
        "",
        "Tools run: edit x1, read_file x1, run x2 (1 failed)",
        "",
        "The assistant last said:",
        "- I changed a.py so the test passes.",
        "",
        "Open task: the latest request — Fix the failing test in tests/test_a.py",
    ])  # fmt: skip


def test_only_events_inside_the_range_count() -> None:
    events = Events()
    floor = events.ask("before the range")
    events.ask("inside the range")
    through = events.tool("c1", "read_file", '{"path": "in.py"}')
    events.ask("after the range")
    text = events.digest(floor, through)
    assert "inside the range" in text
    assert "before the range" not in text and "after the range" not in text


def test_an_earlier_summary_is_carried_and_a_later_one_is_not() -> None:
    events = Events()
    events.add(ev.Compaction, summary="We set up the project.", through_seq=0)
    floor = events.ask("Now add logging")
    through = events.ask("and tests")
    events.add(ev.Compaction, summary="A later summary.", through_seq=through)
    text = events.digest(floor, through)
    assert "Earlier summary:\nWe set up the project." in text
    assert "A later summary" not in text


def test_the_plans_open_entries_are_kept_even_from_before_the_range() -> None:
    events = Events()
    plan = (
        PlanEntry(content="write the parser", status="completed"),
        PlanEntry(content="test the parser", status="in_progress"),
        PlanEntry(content="document it"),
    )
    floor = events.add(ev.PlanUpdated, entries=plan)
    events.ask("go on")
    text = events.digest(floor)
    assert "Open tasks:\n- [in_progress] test the parser\n- [pending] document it" in text
    assert "write the parser" not in text and "Open task: the latest request" not in text


def test_every_part_is_bounded() -> None:
    events = Events()
    for i in range(12):
        events.ask(f"request {i} " + "word " * 200)
    for i in range(40):
        events.tool(f"c{i}", "read_file", f'{{"file": "f{i}.py"}}')
    for i in range(5):
        events.say(f"statement {i}")
    text = events.digest()
    assert "- (4 earlier requests omitted)" in text
    assert "request 3 " not in text and "request 4 " in text
    asked = [line for line in text.splitlines() if line.startswith("- request")]
    assert all(len(line) <= 2 + 400 and line.endswith("...") for line in asked)
    assert "f29.py (and 10 more)" in text and "f30.py" not in text
    assert "statement 1" not in text and "statement 2" in text and "statement 4" in text


def test_whitespace_only_requests_and_unreadable_arguments_are_skipped() -> None:
    events = Events()
    events.ask("   ")
    events.tool("c1", "run", "{not json")
    text = events.digest()
    assert "The user asked" not in text and "Files touched" not in text
    assert "Tools run: run x1" in text


def test_the_same_events_give_the_same_text() -> None:
    events = Events()
    events.ask("a")
    events.tool("c1", "write", '{"path": "x"}')
    assert events.digest() == events.digest()
