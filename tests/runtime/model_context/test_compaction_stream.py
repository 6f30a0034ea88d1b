"""The compaction summary streams while the model writes it, for every trigger that writes one.

A summarize pass logs `compaction_started`, the summary's pieces as
`compaction_summary_delta`, then `compaction` (same id) or `compaction_dropped`. The fake
summarizer here hands out its pieces one at a time and waits for the previous piece to reach
the session's sink before it writes the next, so a compactor that logged the summary only
after the model finished would never get past the first piece (the bounded wait fails).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from steerable_bridge.adapters.llm.scripted import ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    TextChunk,
)
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, of, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LONG = "word " * 80  # about 100 tokens
PIECES = ("  \n", "The user ", "counted turns;", " ", "the assistant", " answered each.", "\n\n")
JOINED = "The user counted turns; the assistant answered each."


class GatedSummarizer:
    """Answers one-off (summary) requests piece by piece: each piece after the first waits
    until the sink saw the one before (`seen`); every other request goes to `scripted`.
    `fail_after` raises a provider error after that many pieces, `hang_after` blocks there."""

    def __init__(
        self,
        scripted: ScriptedProvider,
        pieces: Sequence[str] = PIECES,
        *,
        fail_after: int | None = None,
        hang_after: int | None = None,
    ) -> None:
        self.scripted = scripted
        self.pieces = tuple(pieces)
        self.fail_after = fail_after
        self.hang_after = hang_after
        self.seen: list[str] = []
        self._arrived = anyio.Event()
        self.summaries = 0

    @property
    def info(self) -> ModelInfo:
        return self.scripted.info

    def saw(self, event: ev.LoopEvent) -> None:
        if isinstance(event, ev.CompactionSummaryDelta):
            self.seen.append(event.delta)
            self._arrived.set()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        if not request.one_off:
            async for item in self.scripted.stream(request):
                yield item
            return
        self.summaries += 1
        for index, piece in enumerate(self.pieces):
            if index == self.fail_after:
                raise ProviderError("provider_unavailable", "the summarizer went away")
            if index == self.hang_after:
                await anyio.sleep_forever()
            before = len(self.seen)
            yield TextChunk(delta=piece)
            if piece.strip():  # a piece with text must reach the sink before the next one
                with anyio.fail_after(5):
                    while len(self.seen) == before:
                        self._arrived = anyio.Event()
                        await self._arrived.wait()
        yield ModelResponse(finish_reason="end_turn")


async def _run(session: Session, turn: TurnInput, model: GatedSummarizer) -> list[ev.LoopEvent]:
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)
        model.saw(event)

    with anyio.fail_after(20):
        await session.prompt(turn, sink)
    return seen


def _pass(events: Sequence[ev.LoopEvent]) -> list[ev.LoopEvent]:
    kinds = ("compaction_started", "compaction_summary_delta", "compaction", "compaction_dropped")
    return [e for e in events if e.kind in kinds]


def _assert_streamed(events: Sequence[ev.LoopEvent], trigger: str) -> ev.Compaction:
    started, *deltas, done = _pass(events)
    assert isinstance(started, ev.CompactionStarted) and started.trigger == trigger
    assert isinstance(done, ev.Compaction) and done.trigger == trigger
    assert all(isinstance(d, ev.CompactionSummaryDelta) for d in deltas)
    assert {d.compaction_id for d in deltas} == {started.compaction_id} == {done.compaction_id}
    # the pieces came as the model wrote them, without the leading / trailing whitespace
    assert [d.delta for d in deltas] == ["The user", " counted turns;", " the assistant",
                                         " answered each."]  # fmt: skip
    assert "".join(d.delta for d in deltas) == done.summary == JOINED
    return done


async def test_a_manual_compact_turn_streams_its_summary() -> None:
    model = GatedSummarizer(scripted({"text": LONG}, loop=True))
    session = await make_agent(model).new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="first"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="second"),)), model)
    seen = await _run(session, TurnInput(compact=True), model)
    done = _assert_streamed(seen, "manual")
    assert _pass(seen) == _pass(list(session.log.view()))  # what streamed is what is logged
    texts = [m.text for m in project_history(session.log.view())]
    assert texts[0] == "Summary of the conversation so far:\n" + done.summary


async def test_pressure_streams_its_summary() -> None:
    base = scripted({"text": LONG}, loop=True, context_window=1200, overflow_at=1200)
    model = GatedSummarizer(base)
    session = await make_agent(model).new_session("/work")
    seen: list[ev.LoopEvent] = []
    for turn in range(30):
        seen += await _run(session, TurnInput(content=(TextPart(text=f"turn {turn}"),)), model)
        if of(seen, ev.Compaction):
            break
    _assert_streamed(seen, "pressure")


async def test_overflow_recovery_streams_its_summary() -> None:
    model = GatedSummarizer(scripted({"text": LONG}, loop=True, overflow_at=450))
    session = await make_agent(model).new_session("/work")
    seen: list[ev.LoopEvent] = []
    for turn in range(8):
        seen += await _run(session, TurnInput(content=(TextPart(text=f"turn {turn}"),)), model)
        if of(seen, ev.Compaction):
            break
    _assert_streamed(seen, "overflow")


async def test_a_compact_request_during_a_turn_streams_at_the_next_step() -> None:
    model = GatedSummarizer(scripted({"text": LONG}, loop=True))
    session = await make_agent(model).new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="first"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="second"),)), model)
    seen = await _run(session, TurnInput(content=(TextPart(text="third"),), compact=True), model)
    _assert_streamed(seen, "manual")
    assert of(seen, ev.TextDelta)  # the turn went on to answer after compacting


async def test_a_model_that_does_not_stream_gives_one_piece() -> None:
    model = GatedSummarizer(scripted({"text": LONG}, loop=True), pieces=(JOINED + "\n",))
    session = await make_agent(model).new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="first"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="second"),)), model)
    seen = await _run(session, TurnInput(compact=True), model)
    started, delta, done = _pass(seen)
    assert isinstance(started, ev.CompactionStarted)
    assert isinstance(delta, ev.CompactionSummaryDelta) and delta.delta == JOINED
    assert isinstance(done, ev.Compaction) and done.summary == JOINED and not done.fallback


async def test_a_summary_that_fails_midway_is_replaced_by_the_digest() -> None:
    model = GatedSummarizer(scripted({"text": LONG}, loop=True), fail_after=3)
    session = await make_agent(model).new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="first"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="second"),)), model)
    seen = await _run(session, TurnInput(compact=True), model)
    started, *deltas, done = _pass(seen)
    assert isinstance(started, ev.CompactionStarted)
    assert [d.delta for d in deltas] == ["The user", " counted turns;"]  # what had streamed
    assert isinstance(done, ev.Compaction) and done.fallback
    assert done.summary != "".join(d.delta for d in deltas)  # the digest, not half a summary
    texts = [m.text for m in project_history(session.log.view())]
    assert texts[0] == "Summary of the conversation so far:\n" + done.summary


async def test_a_cancel_mid_summary_drops_the_compaction_and_keeps_the_log_loadable() -> None:
    store = MemoryStore()
    model = GatedSummarizer(scripted({"text": LONG}, loop=True), hang_after=3)
    agent = make_agent(model, store=store)
    session = await agent.new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="first"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="second"),)), model)
    history = project_history(session.log.view())
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)
        model.saw(event)
        if isinstance(event, ev.CompactionSummaryDelta) and len(model.seen) == 2:
            session.cancel()  # the model is still writing: it hangs before its next piece

    with anyio.fail_after(20):
        outcome = await session.prompt(TurnInput(compact=True), sink)
    assert outcome.stop_reason == "cancelled"
    started, *deltas, dropped = _pass(seen)
    assert len(deltas) == 2
    assert isinstance(dropped, ev.CompactionDropped) and dropped.reason == "cancelled"
    assert dropped.compaction_id == started.compaction_id
    assert not of(list(session.log.view()), ev.Compaction)
    assert project_history(session.log.view()) == history  # no half summary in the history
    # the store holds the same, and a fresh agent loads it with the history unchanged
    again = await make_agent(model, store=store).load_session(session.id)
    assert project_history(again.log.view()) == history
    outcome, _ = await prompt(again, "third")
    assert outcome.stop_reason == "end_turn"


async def test_a_declined_compaction_is_recorded_as_not_applied() -> None:
    long_summary = ("a summary far longer than the conversation " * 40,)
    model = GatedSummarizer(scripted({"text": "ok"}, loop=True), pieces=long_summary)
    session = await make_agent(model).new_session("/work")
    await _run(session, TurnInput(content=(TextPart(text="hi"),)), model)
    await _run(session, TurnInput(content=(TextPart(text="again"),)), model)
    history = project_history(session.log.view())
    seen = await _run(session, TurnInput(compact=True), model)
    started, _delta, dropped = _pass(seen)
    assert isinstance(started, ev.CompactionStarted)
    assert isinstance(dropped, ev.CompactionDropped) and dropped.reason == "declined"
    assert dropped.compaction_id == started.compaction_id
    assert dropped.detail == session.compactor.declined and dropped.detail.startswith("Not")
    assert project_history(session.log.view()) == history
