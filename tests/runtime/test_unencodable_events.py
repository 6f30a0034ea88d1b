"""The last line: an event that cannot be encoded fails its turn, never the session.

Text is repaired where it enters (providers, tools, wires). Should an adapter with a bug
still hand the loop a lone surrogate, the store refuses the batch; the log must then store
the event repaired (U+FFFD) instead of retrying it at every later commit, the turn must end
with `run_failed` naming the cause, and the next prompt must work as if nothing happened.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    TextChunk,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolResult
from steerable_bridge.runtime.values import ResourcePart, TextPart

from .harness import make_agent, of, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Buggy:
    """A provider that hands on a lone surrogate unrepaired on its first call only."""

    info = ModelInfo(route="test:m")

    def __init__(self, replaced: int = 0) -> None:
        self.calls = 0
        self.replaced = replaced

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        yield TextChunk(delta="bad \ud800 text" if self.calls == 1 else "all good")
        yield ModelResponse(finish_reason="end_turn", replaced_surrogates=self.replaced)


@pytest.fixture
def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "s.db")
    yield opened  # type: ignore[misc]
    opened.close()


@pytest.mark.parametrize("interval", [0.0, 3600.0])
async def test_an_unencodable_event_fails_the_turn_and_the_session_keeps_working(
    store: SqliteStore, interval: float
) -> None:
    agent = make_agent(Buggy(), store=store, commit_interval_s=interval)  # type: ignore[arg-type]
    session = await agent.new_session("/tmp")
    outcome, events = await prompt(session, "first")
    assert outcome.error_code == "internal_error"
    assert "lone UTF-16 surrogate" in (outcome.error_message or "")
    assert "session keeps working" in (outcome.error_message or "")
    assert isinstance(events[-1], ev.RunFailed) and not of(events, ev.RunFinished)
    assert session.log.repairs == []

    outcome, events = await prompt(session, "second")
    assert outcome.stop_reason == "end_turn"
    assert "".join(e.delta for e in of(events, ev.TextDelta)) == "all good"

    stored = await store.read(session.id)
    assert [e.seq for e in stored] == [e.seq for e in session.log.view()]
    deltas = [e.delta for e in of(stored, ev.TextDelta)]
    assert deltas == ["bad \ufffd text", "all good"]
    assert [e.kind for e in stored].count("run_failed") == 1
    # the history the log keeps was folded again from the repaired events
    assert session.log.history.messages() == project_history(session.log.view())
    assert "bad \ufffd text" in [m.text for m in session.log.history.messages()]

    reloaded = await make_agent(Buggy(), store=store).load_session(session.id)  # type: ignore[arg-type]
    assert len(reloaded.log) == len(session.log)


async def test_a_provider_that_repaired_text_is_reported_as_a_hook_action() -> None:
    class Repaired(Buggy):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
            yield TextChunk(delta="fine \ufffd")
            yield ModelResponse(finish_reason="end_turn", replaced_surrogates=2)

    session = await make_agent(Repaired()).new_session("/tmp")
    outcome, events = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    (action,) = of(events, ev.HookAction)
    assert (action.hook, action.action) == ("text_repair", "replace_surrogates")
    assert "2 lone UTF-16 surrogate" in action.detail


async def test_a_tool_result_with_lone_surrogates_is_repaired_and_said_so() -> None:
    async def handler(args: dict[str, object], ctx: object) -> ToolResult:
        await ctx.output((TextPart(text="progress \udc00"),))  # type: ignore[attr-defined]
        return ToolResult(
            content=(
                TextPart(text="half \ud83d and a pair \ud83d\ude00"),
                ResourcePart(uri="file:///x", text="\udfff"),
            ),
            raw_output_json='{"v":"\ud800"}',
        )

    tool = Tool(name="broken", description="d", kind="read", handler=handler)
    provider = scripted(
        {"tool_calls": [{"id": "c1", "name": "broken", "arguments": {}}]}, {"text": "done"}
    )
    session = await make_agent(provider, tools=[tool]).new_session("/tmp")
    outcome, events = await prompt(session)
    assert outcome.stop_reason == "end_turn"
    (finished,) = of(events, ev.ToolFinished)
    texts = [getattr(part, "text", None) for part in finished.content]
    assert texts == ["half \ufffd and a pair \U0001f600", "\ufffd"]
    assert finished.raw_output_json == '{"v":"\ufffd"}'
    (output,) = of(events, ev.ToolOutput)
    assert output.content == (TextPart(text="progress \ufffd"),)
    (action,) = of(events, ev.HookAction)
    assert action.call_id == "c1" and action.hook == "text_repair"
    assert "3 lone UTF-16 surrogate" in action.detail and "broken" in action.detail
    assert not any(codec.unencodable(e) for e in events)
