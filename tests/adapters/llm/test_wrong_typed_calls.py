"""Tool calls of the wrong shape from an OpenAI-compatible server, through a real turn: the
model is told what was wrong in a tool error it sees on the next step, the handler never runs
on bad input, and the turn ends normally (never `internal_error`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import Location, TextPart
from tests.adapters.llm.test_openai_compat import chunk, sse
from tests.runtime.harness import make_agent, of, prompt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

FINAL = sse(chunk({"content": "Sorry, I will fix the call."}), chunk(finish="stop"))


class FakeServer:
    """Answers `first` until a tool result is in the conversation, then FINAL."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.conversations: list[list[dict[str, Any]]] = []

    def provider(self) -> OpenAICompatProvider:
        async def handler(request: httpx.Request) -> httpx.Response:
            messages = json.loads(request.content).get("messages") or []
            self.conversations.append(messages)
            answered = any(m.get("role") == "tool" for m in messages)
            body = FINAL if answered else self.first
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

        config = OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", backoff_s=0.0)
        return OpenAICompatProvider(config, transport=httpx.MockTransport(handler))


def _call(function: Any) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": function}]})


@pytest.mark.parametrize(
    ("stream", "code", "needle"),
    [
        (_call({"name": "read_file", "arguments": '{"path": 5}'}), "invalid_arguments", "path"),
        (_call({"name": "read_file", "arguments": "[1, 2]"}), "model_protocol_error", "[1, 2]"),
        (_call({"name": "read_file", "arguments": '"a.txt"'}), "model_protocol_error", "a.txt"),
        (_call({"name": "read_file", "arguments": ["a.txt"]}), "model_protocol_error", "a.txt"),
        (_call("read_file"), "model_protocol_error", "no tool name"),
        (chunk({"tool_calls": ["read_file"]}), "model_protocol_error", "no tool name"),
    ],
)
async def test_a_wrong_typed_call_is_a_tool_error_the_model_sees(
    stream: dict[str, Any], code: str, needle: str
) -> None:
    ran: list[dict[str, Any]] = []

    async def read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args)
        return ToolResult(content=(TextPart(text="contents"),))

    tool = Tool(
        name="read_file",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        kind="read",
        handler=read_file,
    )
    server = FakeServer(sse(stream, chunk(finish="tool_calls")))
    session = await make_agent(server.provider(), tools=[tool]).new_session("/work")
    outcome, seen = await prompt(session, "read a.txt")
    assert outcome.stop_reason == "end_turn"
    assert not of(seen, ev.RunFailed)
    finished = of(seen, ev.ToolFinished)
    assert len(finished) == 1 and finished[0].status == "failed"
    assert finished[0].error is not None and finished[0].error.code == code
    assert needle in finished[0].error.message
    assert ran == []
    told = [m for m in server.conversations[-1] if m["role"] == "tool"]
    assert len(told) == 1 and needle in told[0]["content"]


async def test_choices_or_a_delta_that_are_not_objects_are_skipped() -> None:
    stream = sse(
        {"id": "x", "choices": [{"index": 0, "delta": ["junk"]}]},
        {"id": "x", "choices": 5},
        chunk({"content": "Hello."}),
        chunk(finish="stop"),
    )
    session = await make_agent(FakeServer(stream).provider()).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert "".join(e.delta for e in of(seen, ev.TextDelta)) == "Hello."


async def test_a_tool_whose_own_schema_is_invalid_fails_its_calls_not_the_turn() -> None:
    tool = Tool(
        name="read_file",
        description="Read a file.",
        parameters={"type": "object", "properties": {"path": {"type": "strng"}}},
        kind="read",
    )
    stream = sse(_call({"name": "read_file", "arguments": '{"path": "a"}'}), chunk(finish="stop"))
    session = await make_agent(FakeServer(stream).provider(), tools=[tool]).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == "invalid_arguments"
    assert "schema is invalid" in error.message


async def test_a_title_that_cannot_read_wrong_typed_arguments_falls_back() -> None:
    tool = Tool(
        name="grep_like",
        description="Search.",
        parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
        kind="search",
        title=lambda a: f"Search {a['pattern'].strip()}",  # .strip on a list: AttributeError
    )
    stream = sse(
        _call({"name": "grep_like", "arguments": '{"pattern": ["x"]}'}), chunk(finish="stop")
    )
    session = await make_agent(FakeServer(stream).provider(), tools=[tool]).new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn" and not of(seen, ev.RunFailed)
    assert of(seen, ev.ToolCallEnd)[0].title == "Grep like"
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == "invalid_arguments"


async def test_a_wrong_typed_argument_never_spoils_the_stored_log(tmp_path: Path) -> None:
    """Titles and locations are made from arguments before they are checked: a list where a
    line number belongs must not reach the stored `tool_call_end` (the thread would no
    longer load)."""
    tool = Tool(
        name="read_file",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
        },
        kind="read",
        locations=lambda a: (Location(path=str(a.get("path")), line=a.get("line")),),
    )
    stream = sse(
        _call({"name": "read_file", "arguments": '{"path": "a.txt", "line": [1]}'}),
        chunk(finish="stop"),
    )
    db = tmp_path / "sessions.db"
    agent = make_agent(FakeServer(stream).provider(), tools=[tool], store=SqliteStore(db))
    session = await agent.new_session("/w")
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    assert of(seen, ev.ToolCallEnd)[0].locations == (Location(path="a.txt", line=None),)
    reopened = SqliteStore(db)
    try:
        stored = await reopened.read(session.id)
    finally:
        reopened.close()
    assert [e.seq for e in stored] == [e.seq for e in session.log.view()]
