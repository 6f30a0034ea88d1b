"""How a turn records (`runtime/turns/recorder.py`): every event goes to the log and then the
sink; structural kinds (run and step ends, calls, results, requests) are committed to the
store at once, streaming deltas at most every `commit_interval_s`; when the store refuses a
commit the turn ends with the store's code, the rest of the turn still reaches the sink and
stays pending in the log, and no further commit is tried in that turn (the session tries
again once the turn is over, `session.py`)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.turns.turn import RunOutcome, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def watched(
    session: Session, store: MemoryStore
) -> tuple[RunOutcome, list[tuple[ev.LoopEvent, set[int]]]]:
    """Run a turn; for each event the sink saw, the seqs the store held at that moment."""
    seen: list[tuple[ev.LoopEvent, set[int]]] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append((event, {e.seq for e in await store.read(session.id)}))

    with anyio.fail_after(10):
        outcome = await session.prompt(TurnInput(content=(TextPart(text="hi"),)), sink)
    return outcome, seen


def stored_at(seen: Sequence[tuple[ev.LoopEvent, set[int]]], kind: str) -> set[int]:
    return next(stored for event, stored in seen if event.kind == kind)


def seqs(seen: Sequence[tuple[ev.LoopEvent, set[int]]], *kinds: str) -> set[int]:
    return {event.seq for event, _ in seen if event.kind in kinds}


async def test_structural_events_are_committed_at_once_and_deltas_are_batched() -> None:
    store = MemoryStore()
    agent = make_agent(
        scripted({"text": "a b c d", "chunk_size": 2}), store=store, commit_interval_s=3600
    )
    session = await agent.new_session("/w")
    outcome, seen = await watched(session, store)
    assert outcome.stop_reason == "end_turn"
    request = seqs(seen, "model_request")
    streamed = seqs(seen, "text_start", "text_delta")
    assert request <= stored_at(seen, "text_start")  # committed before the stream began
    assert not streamed & stored_at(seen, "text_end")  # the deltas wait
    assert streamed <= stored_at(seen, "run_finished")  # step_finished committed them
    assert {e.seq for e in await store.read(session.id)} == {e.seq for e, _ in seen}


async def test_with_no_interval_every_delta_is_committed_as_it_comes() -> None:
    store = MemoryStore()
    agent = make_agent(
        scripted({"text": "a b c d", "chunk_size": 2}), store=store, commit_interval_s=0
    )
    _, seen = await watched(await agent.new_session("/w"), store)
    deltas = [event.seq for event, _ in seen if event.kind == "text_delta"]
    assert len(deltas) > 1
    later = [stored for event, stored in seen if event.seq > deltas[0]]
    assert all(deltas[0] in stored for stored in later)


class FillingStore(MemoryStore):
    """A store whose disk fills up once `full` is set: every append then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.refused = 0

    async def append(self, session_id: str, events: Sequence[ev.LoopEvent]) -> None:
        if self.full:
            self.refused += 1
            raise StoreError("storage_full", "the disk is full", "free some space")
        await super().append(session_id, events)


async def test_a_refused_commit_ends_the_turn_once_with_the_stores_code() -> None:
    store = FillingStore()
    session = await make_agent(scripted({"text": "hello"}), store=store).new_session("/w")
    before = len(await store.read(session.id))
    store.full = True
    seen: list[ev.LoopEvent] = []
    refused_during_turn: list[int] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)
        if isinstance(event, ev.RunFailed):
            refused_during_turn.append(store.refused)

    with anyio.fail_after(10):
        outcome = await session.prompt(TurnInput(content=(TextPart(text="hi"),)), sink)
    assert outcome.error_code == "storage_full"
    assert "free some space" in (outcome.error_message or "")
    assert refused_during_turn == [1]  # the turn tried no commit after the first refusal
    failed = seen[-1]
    assert isinstance(failed, ev.RunFailed) and failed.code == "storage_full"
    assert len(await store.read(session.id)) == before  # nothing of the turn was written
    assert session.log.uncommitted == len(seen)  # all of it is still pending in the log
