"""Per-item bounding: a huge tool result reaches the model cut in the middle, kept in full."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.tool_calls.bounding import OutputLimits, bound_content
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, of, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

HUGE = "".join(f"row {i}\n" for i in range(10_000))


class MemorySpill:
    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], str] = {}

    async def save(self, session_id: str, call_id: str, text: str) -> str:
        self.saved[(session_id, call_id)] = text
        return f"/spill/{session_id}/{call_id}.txt"

    async def forget(self, session_id: str) -> None:
        self.saved = {key: text for key, text in self.saved.items() if key[0] != session_id}


async def test_a_huge_result_is_cut_in_the_middle_and_kept_in_full() -> None:
    async def dump(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=(TextPart(text=HUGE),))

    tool = Tool(name="dump", description="dump", kind="read", handler=dump)
    provider = scripted(
        {"tool_calls": [{"id": "c1", "name": "dump", "arguments": {}}]}, {"text": "done"}, loop=True
    )
    agent = make_agent(provider, tools=[tool])
    spill = agent.spill = MemorySpill()
    session = await agent.new_session("/work")
    outcome, seen = await prompt(session, "go")
    assert outcome.stop_reason == "end_turn"
    (finished,) = of(seen, ev.ToolFinished)
    text = finished.content[0].text  # type: ignore[union-attr]
    assert text.startswith("[output truncated: 10001 lines")
    assert f"/spill/{session.id}/c1.txt" in text and "read_file" in text
    assert "row 0\n" in text and "row 9999\n" in text and "row 5000\n" not in text
    assert len(text.splitlines()) <= 2003 and len(text.encode()) <= 50_000
    assert spill.saved[(session.id, "c1")] == HUGE
    other = await agent.new_session("/work")
    await prompt(other, "go")
    assert await agent.delete_session(session.id)
    assert not any(sid == session.id for sid, _ in spill.saved)  # deleted with its session
    assert (other.id, "c1") in spill.saved


async def test_small_results_and_non_text_pass_unchanged() -> None:
    content = (TextPart(text="short"),)
    same = await bound_content(content, OutputLimits(), spill=None, session_id="s", call_id="c")
    assert same == content


async def test_without_a_spill_the_header_says_the_middle_is_gone() -> None:
    cut = await bound_content(
        (TextPart(text="x" * 200_000),),
        OutputLimits(max_bytes=1000),
        spill=None,
        session_id="s",
        call_id="c",
    )
    text = cut[0].text  # type: ignore[union-attr]
    assert "was not kept" in text and len(text) < 1500
