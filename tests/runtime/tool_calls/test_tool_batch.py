"""`ToolBatch` (`runtime/tool_calls/tool_batch.py`), driven through real turns: malformed
calls become `model_protocol_error` results that tell the model how to call again; a
frontend tool is left pending for the client and settled by its result in the next run (a
call it did not answer gets a `cancelled` result); twin calls of a parallel-safe tool run one
after the other. Every call ends with exactly one `tool_finished`. The common paths (unknown
tool, invalid arguments, timeouts) are pinned in `test_loop.py`; permissions asked, deferred
approvals and the client's resume in `test_decision.py`."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.turns.turn import ClientToolResult
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import (
    answer,
    assert_every_call_finished_once,
    assert_well_formed,
    call,
    finished,
    make_agent,
    of,
    prompt,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@pytest.mark.parametrize(
    ("script_call", "needle"),
    [
        ({"id": "c1", "name": "", "arguments": {"text": "x"}}, "call one of these tools by name"),
        ({"id": "c1", "name": "echo", "arguments": ["x"]}, "not a JSON object"),
    ],
)
async def test_a_malformed_call_is_a_protocol_error_the_model_is_told_how_to_fix(
    script_call: dict[str, Any], needle: str
) -> None:
    model = scripted({"tool_calls": [script_call]}, {"text": "ok"})
    agent = make_agent(model, tools=[text_tool(), text_tool("write", kind="edit")])
    outcome, seen = await prompt(await agent.new_session("/w"))
    assert outcome.stop_reason == "end_turn"
    result = finished(seen)["c1"]
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "model_protocol_error" and needle in result.error.message
    if not script_call["name"]:
        assert "echo, write" in result.error.message  # it names the tools there are
    assert_well_formed(seen)


def frontend_tool(name: str = "pick_colour") -> Tool:
    return text_tool(name, executor="frontend")


async def test_a_frontend_call_waits_for_the_client_and_its_result_settles_it() -> None:
    model = scripted(
        {"tool_calls": [call("c1", "pick_colour", text="which?")]}, {"text": "Blue it is."}
    )
    session = await make_agent(model, tools=[frontend_tool()]).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "interrupted"
    assert of(seen, ev.RunFinished)[0].pending_tool_call_ids == ("c1",)
    assert "c1" not in finished(seen)  # left open, not cancelled
    result = ClientToolResult(call_id="c1", content=(TextPart(text="blue"),))
    outcome, seen = await answer(session, tool_results=(result,))
    assert outcome.stop_reason == "end_turn"
    settled = finished(seen)["c1"]
    assert settled.status == "completed" and settled.content == (TextPart(text="blue"),)
    request = of(seen, ev.ModelRequestEvent)[0].request
    assert request.messages[-1].role == "tool" and request.messages[-1].text == "blue"


async def test_a_frontend_call_the_client_does_not_answer_is_cancelled_next_run() -> None:
    model = scripted({"tool_calls": [call("c1", "pick_colour", text="?")]}, {"text": "ok"})
    session = await make_agent(model, tools=[frontend_tool()]).new_session("/w")
    await prompt(session)
    _, seen = await prompt(session, "never mind")
    settled = finished(seen)["c1"]
    assert settled.status == "cancelled" and settled.error is not None
    assert "no result was given" in settled.error.message
    assert_every_call_finished_once(session)


async def test_twin_calls_of_a_parallel_safe_tool_run_one_after_the_other() -> None:
    trace: list[str] = []

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        trace.append(f"start {ctx.call_id}")
        for _ in range(5):
            await anyio.lowlevel.checkpoint()  # room for a concurrent call to start
        trace.append(f"end {ctx.call_id}")
        return ToolResult(content=(TextPart(text=args["text"]),))

    tool = text_tool("look", kind="read", parallel_safe=True, handler=handler)
    twins = [call("c1", "look", text="a"), call("c2", "look", text="a")]
    model = scripted({"tool_calls": [*twins, call("c3", "look", text="b")]}, {"text": "ok"})
    _, seen = await prompt(await make_agent(model, tools=[tool]).new_session("/w"))
    assert trace[:2] == ["start c1", "end c1"]  # the twin waits for the first's result
    assert set(trace[2:]) == {"start c2", "end c2", "start c3", "end c3"}
    assert trace.index("start c3") < trace.index("end c2")  # distinct calls still overlap
    assert list(finished(seen)) == ["c1", "c2", "c3"]
