"""Per-item bounding: no single tool result may flood the model's context.

Every result the model will see — workspace tools, MCP tools, user tools, a frontend
tool's answer — passes `bound_content` once, in the runtime's tool-result path, before it
is logged. A text part over `OutputLimits` (default 2,000 lines or 50 KB) keeps its head and
its tail and loses its middle, behind a header that says what was cut and where the whole
text went: `Spill.save` (a port; the CLI gives a file store under the session's state
directory that `read_file` can page through) keeps the full text. Without a spill, or when
saving fails, the header says the middle is gone. Pure apart from calling the port.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from steerable_bridge.runtime.values import TextPart, ToolContent

__all__ = ["OutputLimits", "Spill", "bound_content", "cut_middle"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputLimits:
    """The largest tool result text the model sees."""

    max_lines: int = 2000
    max_bytes: int = 50_000


class Spill(Protocol):
    """Keeps the full text of a bounded result.

    `save(session_id, call_id, text)` stores it and returns a path the session's
    `read_file` can read (with `line` / `limit` to page through), or raises `OSError`.
    `forget(session_id)` removes everything kept for the session (when it is deleted);
    nothing kept is not an error.
    """

    async def save(self, session_id: str, call_id: str, text: str) -> str: ...

    async def forget(self, session_id: str) -> None: ...


def cut_middle(text: str, limits: OutputLimits) -> tuple[str, int, int] | None:
    """(head + tail, lines kept from the head, lines kept from the tail), or None when `text`
    is within the limits. Cuts at line ends; a single enormous line is cut by bytes."""
    data = text.encode("utf-8")
    lines = text.splitlines(keepends=True)
    if len(lines) <= limits.max_lines and len(data) <= limits.max_bytes:
        return None
    budget_lines = max(2, limits.max_lines)
    budget_bytes = max(64, limits.max_bytes - 400)  # room for the header
    head_lines, tail_lines = budget_lines // 2, budget_lines - budget_lines // 2
    head: list[str] = []
    size = 0
    for line in lines[:head_lines]:
        cost = len(line.encode("utf-8"))
        if size + cost > budget_bytes // 2:
            break
        head.append(line)
        size += cost
    tail: list[str] = []
    size = 0
    for line in reversed(lines[len(head) :][-tail_lines:]):
        cost = len(line.encode("utf-8"))
        if size + cost > budget_bytes // 2:
            break
        tail.append(line)
        size += cost
    tail.reverse()
    if not head and not tail:  # one line longer than the budget
        half = budget_bytes // 2
        start = data[:half].decode("utf-8", errors="ignore")
        end = data[-half:].decode("utf-8", errors="ignore")
        return f"{start}\n[...]\n{end}", 0, 0
    return "".join(head) + "".join(tail), len(head), len(tail)


async def bound_content(
    content: tuple[ToolContent, ...],
    limits: OutputLimits,
    *,
    spill: Spill | None,
    session_id: str,
    call_id: str,
) -> tuple[ToolContent, ...]:
    """`content` with every oversized text part cut in the middle (see the module)."""
    bounded: list[ToolContent] = []
    for index, part in enumerate(content):
        if not isinstance(part, TextPart):
            bounded.append(part)
            continue
        cut = cut_middle(part.text, limits)
        if cut is None:
            bounded.append(part)
            continue
        kept, head, tail = cut
        where = None
        if spill is not None:
            name = call_id if index == 0 else f"{call_id}-{index}"
            try:
                where = await spill.save(session_id, name, part.text)
            except OSError as error:
                logger.warning("could not keep the full output of %s: %s", call_id, error)
        total_lines = part.text.count("\n") + 1
        total_bytes = len(part.text.encode("utf-8"))
        shown = (
            f"the first {head} and last {tail} lines"
            if head or tail
            else "the start and end of its one very long line"
        )
        header = (
            f"[output truncated: {total_lines} lines, {total_bytes} bytes; showing {shown}."
            + (
                f" The full output is in {where} — read it with read_file (line, limit)"
                " for the part you need.]"
                if where
                else " The middle was not kept; run the tool again with a narrower request.]"
            )
        )
        if head and tail:
            head_text = "".join(kept.splitlines(keepends=True)[:head])
            tail_text = kept[len(head_text) :]
            omitted = total_lines - head - tail
            text = f"{header}\n{head_text}[... {omitted} lines omitted ...]\n{tail_text}"
        else:
            text = f"{header}\n{kept}"
        bounded.append(TextPart(text=text))
    return tuple(bounded)
