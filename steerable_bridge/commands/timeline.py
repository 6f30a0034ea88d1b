"""A run as a text waterfall: `sessions show ID --timeline`.

`timelines(events)` reads a session's LoopEvents and returns one `RunTimeline` per run: its
rows, each a bracket the loop logged — the run, each step, each model call (model_request →
model_response), each permission wait (permission_requested → permission_resolved) and each
tool run (tool_started → tool_finished) — with start and end in the events' `ts`
(milliseconds) and a note (stop reason, finish reason, tool status, permission outcome).
A bracket that never closed ends with its run and says so. `draw(timeline, width)` renders
one as lines of text: label, duration, and a bar placed on the run's time axis. Pure: no
I/O, nothing read but the events given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from steerable_bridge.commands.terminal import printable
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent

__all__ = ["Row", "RunTimeline", "draw", "timelines"]


@dataclass(slots=True)
class Row:
    """One bracket: `depth` 0 is the run, 1 a step, 2 what happened inside a step."""

    depth: int
    label: str
    start: int
    end: int | None = None
    note: str = ""


@dataclass(slots=True)
class RunTimeline:
    run_id: str
    trace_id: str | None
    rows: list[Row] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.rows[0].start

    @property
    def end(self) -> int:
        return max(row.end if row.end is not None else row.start for row in self.rows)


class _Builder:
    def __init__(self, started: ev.RunStarted) -> None:
        self.run = RunTimeline(started.run_id, started.trace_id)
        self.run.rows.append(Row(0, f"run {started.run_id}", started.ts))
        self.step: Row | None = None
        self.model: Row | None = None
        self.tools: dict[str, Row] = {}
        self.waits: dict[str, Row] = {}
        self.names: dict[str, str] = {}

    def add(self, depth: int, label: str, ts: int) -> Row:
        row = Row(depth if self.step is not None else depth - 1, label, ts)
        self.run.rows.append(row)
        return row

    def event(self, event: LoopEvent) -> bool:
        """Take one event of the run; True once the run has ended."""
        if isinstance(event, ev.RunFinished | ev.RunFailed):
            self._end(event)
            return True
        if not self._frame(event):
            self._wait(event)
        return False

    def _frame(self, event: LoopEvent) -> bool:
        """A step, a model call or a tool opening or closing; False for any other event."""
        ts = event.ts
        if isinstance(event, ev.StepStarted):
            self.step = self.add(1, f"step {event.step}", ts)
            self.step.depth = 1
        elif isinstance(event, ev.StepFinished):
            if self.step is not None:
                self.step.end, self.step.note = ts, event.finish_reason
            self.step = None
        elif isinstance(event, ev.ModelRequestEvent):
            self.model = self.add(2, f"model {event.request.model}", ts)
        elif isinstance(event, ev.ModelResponseEvent):
            if self.model is not None:
                usage = event.usage
                self.model.end = ts
                self.model.note = (
                    f"{event.finish_reason}, {usage.prompt_tokens} in / "
                    f"{usage.completion_tokens} out"
                )
            self.model = None
        elif isinstance(event, ev.ToolCallEnd):
            self.names[event.call_id] = event.name
        elif isinstance(event, ev.ToolStarted):
            name = self.names.get(event.call_id, event.call_id)
            self.tools[event.call_id] = self.add(2, f"tool {name}", ts)
        elif isinstance(event, ev.ToolFinished):
            name = self.names.get(event.call_id, event.call_id)
            row = self.tools.pop(event.call_id, None) or self.add(2, f"tool {name}", ts)
            row.end = ts
            row.note = event.status
            if event.error is not None:
                row.note += f" ({event.error.code})"
        else:
            return False
        return True

    def _wait(self, event: LoopEvent) -> None:
        """A permission or a question asked or answered, or a notice; other events add nothing."""
        ts = event.ts
        if isinstance(event, ev.PermissionRequested):
            self.waits[event.call_id] = self.add(2, f"permission {event.tool_name}", ts)
        elif isinstance(event, ev.PermissionResolved):
            wait = self.waits.pop(event.call_id, None) or self.add(
                2, f"permission {event.tool_name}", ts
            )
            wait.end, wait.note = ts, event.outcome
        elif isinstance(event, ev.QuestionAsked):
            label = "question" if event.url is None else "question (url)"
            self.waits[event.question_id] = self.add(2, label, ts)
        elif isinstance(event, ev.QuestionAnswered):
            asked = self.waits.pop(event.question_id, None) or self.add(2, "question", ts)
            asked.end, asked.note = ts, event.action
        elif isinstance(event, ev.Notice):
            told = self.add(2, f"notice ({event.severity}): {event.title}", ts)
            told.end = ts

    def _end(self, event: ev.RunFinished | ev.RunFailed) -> None:
        """The run's end: its head row closes, and so does every row still open."""
        ts = event.ts
        head = self.run.rows[0]
        head.end = ts
        if isinstance(event, ev.RunFinished):
            head.note = event.stop_reason
        else:
            head.note = f"failed: {event.code}"
        for row in self.run.rows:
            if row.end is None:
                row.end = ts
                row.note = row.note or "did not finish"


def timelines(events: Sequence[LoopEvent]) -> list[RunTimeline]:
    """Every run in `events`, in order (an unfinished run ends at its last event)."""
    out: list[RunTimeline] = []
    builder: _Builder | None = None
    for event in events:
        if isinstance(event, ev.RunStarted):
            builder = _Builder(event)
            out.append(builder.run)
        elif builder is not None and event.run_id == builder.run.run_id and builder.event(event):
            builder = None
    for run in out:
        last = run.end
        for row in run.rows:
            if row.end is None:
                row.end, row.note = last, row.note or "still open"
    return out


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def draw(run: RunTimeline, width: int = 40) -> list[str]:
    """The run as text lines: indented label, duration, note, and a bar on the run's axis."""
    start, total = run.start, max(run.end - run.start, 1)
    labels = ["  " * row.depth + printable(row.label, layout=False) for row in run.rows]
    label_width = min(max(len(label) for label in labels), 48)
    lines = []
    if run.trace_id:
        lines.append(f"trace {run.trace_id}")
    for row, label in zip(run.rows, labels, strict=True):
        end = row.end if row.end is not None else row.start
        left = round((row.start - start) / total * width)
        span = max(round((end - start) / total * width) - left, 1)
        left = min(left, width - 1)
        span = min(span, width - left)
        bar = " " * left + "█" * span + " " * (width - left - span)
        note = f"  {printable(row.note, layout=False)}" if row.note else ""
        lines.append(
            f"{label[:label_width]:<{label_width}}  {_duration(end - row.start):>9}  |{bar}|{note}"
        )
    return lines
