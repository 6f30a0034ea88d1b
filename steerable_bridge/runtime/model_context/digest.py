"""The deterministic digest: what compaction writes when the model's summary call fails.

`digest(events, floor, through)` reads the events a compaction folds (seq in
`(floor, through]`) and writes a structured, bounded text: the earlier summary (if the range
starts after one), what the user asked, the files the tools touched, what the tools did, the
assistant's last statements (its decisions) and the plan entries still open. It never calls
anything and always gives the same text for the same events, so a compaction that cannot
reach the model still shrinks the context and keeps what the next step needs. Pure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import ContentPart, DiffContent, PlanEntry, TextPart

__all__ = ["digest"]

_ASK_CHARS = 400
_SAY_CHARS = 400
_MAX_ASKS = 8
_MAX_SAYS = 3
_MAX_FILES = 30
_PATH_KEYS = ("path", "file", "file_path", "filename", "target", "source", "destination")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(content: Iterable[ContentPart]) -> str:
    return " ".join(p.text for p in content if isinstance(p, TextPart))


def _paths(call: ev.ToolCallEnd) -> list[str]:
    found = [loc.path for loc in call.locations]
    try:
        args = json.loads(call.arguments_json) if call.arguments_json else {}
    except ValueError:
        args = {}
    if isinstance(args, dict):
        found += [v for k, v in args.items() if k in _PATH_KEYS and isinstance(v, str) and v]
    return found


@dataclass
class _Gathered:
    """What the digest keeps of the folded events, gathered in one pass."""

    earlier: str = ""
    asks: list[str] = field(default_factory=list)
    says: list[str] = field(default_factory=list)
    files: dict[str, None] = field(default_factory=dict)
    tools: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    names: dict[str, str] = field(default_factory=dict)
    plan: tuple[PlanEntry, ...] = ()
    current: list[str] = field(default_factory=list)

    def end_text(self) -> None:
        if self.current:
            self.says.append(_clip("".join(self.current), _SAY_CHARS))
            self.current.clear()

    def take(self, event: ev.LoopEvent) -> None:
        """One event inside the folded range."""
        if isinstance(event, ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied):
            text = _text(event.content)
            if text.strip():
                self.asks.append(_clip(text, _ASK_CHARS))
        elif isinstance(event, ev.TextDelta):
            self.current.append(event.delta)
        elif isinstance(event, ev.TextEnd | ev.ModelResponseEvent):
            self.end_text()
        elif isinstance(event, ev.ToolCallEnd):
            self.names[event.call_id] = event.name
            self.tools[event.name] += 1
            for path in _paths(event):
                self.files.setdefault(path)
        elif isinstance(event, ev.ToolFinished):
            if event.status != "completed":
                self.failed[self.names.get(event.call_id, "?")] += 1
            for part in event.content:
                if isinstance(part, DiffContent):
                    self.files.setdefault(part.path)


def _gather(events: Sequence[ev.LoopEvent], floor: int, through: int) -> _Gathered:
    got = _Gathered()
    for event in events:
        if isinstance(event, ev.Compaction) and event.scope == "history":
            if event.seq <= through:
                got.earlier = event.summary
            continue
        if isinstance(event, ev.PlanUpdated):
            got.plan = event.entries  # the plan outlives compaction, even when earlier
        if floor < event.seq <= through:
            got.take(event)
    got.end_text()
    return got


def digest(events: Sequence[ev.LoopEvent], *, floor: int, through: int) -> str:
    """A structured summary of the events with `floor < seq <= through`."""
    got = _gather(events, floor, through)
    asks, files, tools, failed = got.asks, got.files, got.tools, got.failed
    lines = ["(Deterministic digest: the model's summary was not available.)"]
    if got.earlier:
        lines += ["", "Earlier summary:", _clip(got.earlier, 2000)]
    if asks:
        lines += ["", "The user asked:"]
        skipped = len(asks) - _MAX_ASKS
        if skipped > 0:
            lines.append(f"- ({skipped} earlier requests omitted)")
        lines += [f"- {ask}" for ask in asks[-_MAX_ASKS:]]
    if files:
        shown = list(files)[:_MAX_FILES]
        more = f" (and {len(files) - len(shown)} more)" if len(files) > len(shown) else ""
        lines += ["", f"Files touched: {', '.join(shown)}{more}"]
    if tools:
        summary = ", ".join(
            f"{name} x{count}" + (f" ({failed[name]} failed)" if failed[name] else "")
            for name, count in sorted(tools.items())
        )
        lines += ["", f"Tools run: {summary}"]
    if got.says:
        lines += ["", "The assistant last said:"] + [f"- {say}" for say in got.says[-_MAX_SAYS:]]
    open_tasks = [entry for entry in got.plan if entry.status != "completed"]
    if open_tasks:
        lines += ["", "Open tasks:"] + [
            f"- [{entry.status}] {_clip(entry.content, 200)}" for entry in open_tasks[:20]
        ]
    elif asks:
        lines += ["", f"Open task: the latest request — {asks[-1]}"]
    return "\n".join(lines)
