"""The runtime behind the agent port (`LocalPort`): what a transport sees through it."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
from steerable_bridge.runtime.ports.port import AgentPort, Attachments
from steerable_bridge.runtime.ports.storage import SessionBusy, SessionNotFound
from steerable_bridge.runtime.session_log.replay import coalesce_deltas
from steerable_bridge.runtime.turns.turn import ResumeDecision, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.lanes import share
from tests.runtime.harness import make_agent, scripted, text_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _port(*rounds: dict[str, Any], **options: Any) -> LocalPort:
    return LocalPort(make_agent(scripted(*rounds, loop=True), **options))


async def _run(
    port: AgentPort, conversation_id: str, text: str = "hi", **turn: Any
) -> tuple[Any, list[ev.LoopEvent]]:
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)

    with anyio.fail_after(10):
        content = (TextPart(text=text),) if text else ()
        outcome = await port.prompt(conversation_id, TurnInput(content=content, **turn), sink)
    return outcome, seen


async def test_a_prompt_streams_to_the_sink_and_the_outcome_carries_the_final_event() -> None:
    port: AgentPort = _port({"text": "hello"})
    conversation = await port.open("/tmp")
    outcome, seen = await _run(port, conversation.conversation_id)
    assert outcome.stop_reason == "end_turn"
    assert isinstance(seen[-1], ev.RunFinished)
    assert outcome.final_event == seen[-1]
    history = await port.events_after(conversation.conversation_id)
    assert list(history) == seen
    assert list(await port.events_after(conversation.conversation_id, seen[3].seq)) == seen[4:]


async def test_a_reserved_conversation_refuses_other_prompts_until_its_holder_runs() -> None:
    port = _port({"text": "hello"})
    cid = (await port.open("/tmp")).conversation_id
    hold = port.reserve(cid)
    assert hold is not None
    assert port.reserve(cid) is None
    with pytest.raises(SessionBusy):
        await _run(port, cid)
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)

    await port.prompt(cid, TurnInput(content=(TextPart(text="x"),)), sink, reservation=hold)
    assert isinstance(seen[-1], ev.RunFinished)
    assert port.reserve(cid) is not None  # the turn let go of the hold


async def test_without_an_asker_a_permission_is_deferred_and_answered_by_resume() -> None:
    tool = text_tool("write", kind="edit")
    port = _port(
        {"tool_calls": [{"id": "c1", "name": "write", "arguments": {"text": "x"}}]},
        {"text": "done"},
        tools=[tool],
        approval="ask",
    )
    conversation = await port.open("/tmp")
    outcome, seen = await _run(port, conversation.conversation_id)
    assert outcome.stop_reason == "interrupted"
    assert any(isinstance(event, ev.PermissionRequested) for event in seen)
    loaded = await port.load(conversation.conversation_id)
    assert loaded.open_calls == ("c1",)
    resume = (ResumeDecision(call_id="c1", approved=True),)
    outcome, seen = await _run(port, conversation.conversation_id, "", resume=resume)
    assert outcome.stop_reason == "end_turn"
    results = [e for e in seen if isinstance(e, ev.ToolFinished)]
    assert [r.status for r in results] == ["completed"]


async def test_an_asker_given_at_open_is_asked_in_the_turn() -> None:
    asked: list[str] = []

    async def asker(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.call_id)
        return PermissionAnswer(outcome="reject_once", option_id="reject_once")

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(asker=asker)

    port = _port(
        {"tool_calls": [{"id": "c1", "name": "write", "arguments": {"text": "x"}}]},
        {"text": "ok"},
        tools=[text_tool("write", kind="edit")],
        approval="ask",
    )
    cid = (await port.open("/tmp", attach=attach)).conversation_id
    outcome, _ = await _run(port, cid)
    assert asked == ["c1"]
    assert outcome.stop_reason == "end_turn"


async def test_mode_model_and_recorded_events_are_logged_once() -> None:
    port = _port({"text": "hello"})
    port.agent.router.offer("test:m")
    cid = (await port.open("/tmp")).conversation_id
    changed = await port.set_mode(cid, "read-only")
    assert isinstance(changed, ev.ModeChanged) and changed.seq >= 0
    assert await port.set_mode(cid, "read-only") is None
    with pytest.raises(ValueError, match="modes: default"):
        await port.set_mode(cid, "nope")
    with pytest.raises(ValueError, match="models: test:m"):
        await port.set_model(cid, "other:x")
    note = ev.CommandsUpdated(session_id="", run_id="", seq=-1, ts=0, commands=())
    logged = await port.record(cid, note)
    assert logged.session_id == cid and logged.seq == changed.seq + 1
    assert (await port.load(cid)).mode == "read-only"


async def test_fork_copies_the_history_and_unknown_ids_are_not_found() -> None:
    port = _port({"text": "hello"})
    cid = (await port.open("/tmp")).conversation_id
    _, seen = await _run(port, cid)
    fork = await port.fork(cid, "/tmp")
    copied = await port.events_after(fork.conversation_id)
    assert [(e.kind, e.seq) for e in copied] == [(e.kind, e.seq) for e in seen]
    with pytest.raises(SessionNotFound):
        await port.load("sess_missing")
    assert await port.delete(fork.conversation_id)
    assert not await port.delete(fork.conversation_id)


async def test_a_session_memory_forgot_comes_back_with_its_attachments() -> None:
    """Over the cap or past the TTL the agent forgets an idle session; loaded again, it
    still defers (never attached) or asks its asker (attached) — not the default policy,
    which would refuse the call."""
    asked: list[str] = []

    async def asker(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.call_id)
        return PermissionAnswer(outcome="allow_once", option_id="allow_once")

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(asker=asker)

    def port() -> LocalPort:
        return _port(
            {"tool_calls": [{"id": "c1", "name": "write", "arguments": {"text": "x"}}]},
            {"text": "ok"},
            tools=[text_tool("write", kind="edit")],
            approval="ask",
        )

    first, second = port(), port()
    deferred = (await first.open("/tmp")).conversation_id
    attached = (await second.open("/tmp", attach=attach)).conversation_id
    assert first.agent.forget(deferred) and second.agent.forget(attached)
    outcome, seen = await _run(first, deferred)
    assert outcome.stop_reason == "interrupted"
    assert any(isinstance(event, ev.PermissionRequested) for event in seen)
    outcome, _ = await _run(second, attached)
    assert asked == ["c1"] and outcome.stop_reason == "end_turn"


async def test_compact_reaches_only_a_running_turn_and_info_names_the_tools() -> None:
    port = _port({"text": "slow", "hang": True}, tools=[text_tool("write", kind="edit")])
    cid = (await port.open("/tmp")).conversation_id
    assert not await port.request_compact(cid)  # idle: a compact turn is the way
    assert "write" in port.info().tools
    started = anyio.Event()

    async def sink(event: ev.LoopEvent) -> None:
        started.set()

    async def run() -> None:
        await port.prompt(cid, TurnInput(content=(TextPart(text="go"),)), sink)

    async with anyio.create_task_group() as tasks:
        await tasks.start(port.relay_signals)  # a store only this process uses: at once
        tasks.start_soon(run)
        with anyio.fail_after(5):
            await started.wait()
        assert (await port.load(cid)).running
        assert await port.request_compact(cid)
        assert await port.cancel(cid, "done")


async def test_a_compact_turn_that_would_grow_the_conversation_says_why() -> None:
    long_summary = {"text": "A very long summary of almost nothing at all. " * 10}
    port = LocalPort(
        make_agent(scripted({"text": "Hi."}, loop=True, summary_rounds=[long_summary]))
    )
    cid = (await port.open("/tmp")).conversation_id
    await _run(port, cid, "hello")
    outcome, seen = await _run(port, cid, "", compact=True)
    assert outcome.stop_reason == "end_turn"
    assert not any(isinstance(e, ev.Compaction) for e in seen)
    assert outcome.notice.startswith("Not compacted") and "would not be smaller" in outcome.notice
    plain, _ = await _run(port, cid, "again")
    assert plain.notice == ""


async def test_a_port_with_a_family_lists_only_its_own_conversations_page_by_page() -> None:
    agent = make_agent(scripted({"text": "hi"}, loop=True))
    port = LocalPort(agent, family=lambda route: route == "acp-agent:codex")
    mine = []
    for _ in range(5):  # interleaved with another family's
        await agent.new_session("/w", model="demo:default")
        mine.append((await port.open("/w", model="acp-agent:codex")).conversation_id)
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        page = await port.list(cursor=cursor, limit=2)
        assert len(page.records) <= 2
        seen += [record.session_id for record in page.records]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(mine)  # every one of its own, none of the others, once
    everything = await LocalPort(agent).list(limit=50)
    assert len(everything.records) == 10  # the unfiltered port still sees the whole store


async def test_a_compacted_conversation_loaded_from_its_tail_replays_exactly_from_any_seq(
    tmp_path: Path,
) -> None:
    summary = {"text": "SUMMARY: the user counted turns."}
    provider = scripted(
        {"text": "word " * 80, "chunk_size": 7},
        loop=True,
        context_window=600,
        summary_rounds=[summary],
    )
    first = LocalPort(make_agent(provider, store=SqliteStore(tmp_path / "s.db")))
    cid = (await first.open("/work")).conversation_id
    for turn in range(8):
        await _run(first, cid, f"turn {turn}")
    logged = list(await first.events_after(cid))
    assert any(isinstance(e, ev.Compaction) for e in logged)
    await first.aclose()
    # Another process: the conversation comes back from its tail, its runs of deltas folded.
    port = LocalPort(make_agent(provider, store=SqliteStore(tmp_path / "s.db")))
    assert list(await port.events_after(cid)) == logged
    loaded = port.agent.get(cid)
    assert loaded is not None and loaded.log.base > 0  # memory holds only the tail
    # every seq in the full suite; in the fast lane a fixed share, and each seq at an edge:
    # the loaded tail's start, a compaction, either side of a change of kind (a run of
    # deltas begins or ends), the ends
    edges = {loaded.log.base + d for d in (-2, -1, 0, 1)} | {len(logged) - 2}
    edges |= {e.seq + d for e in logged if isinstance(e, ev.Compaction) for d in (-1, 0, 1)}
    edges |= {s for a, b in pairwise(logged) if type(a) is not type(b) for s in (a.seq, b.seq)}
    seqs = sorted({*share(range(-1, len(logged))), *(s for s in edges if -1 <= s < len(logged))})
    for seq in seqs:
        after = [e for e in logged if e.seq > seq]
        assert list(await port.events_after(cid, seq)) == after
        assert list(await port.replay_after(cid, seq)) == list(coalesce_deltas(after))
    outcome, seen = await _run(port, cid, "one more")
    assert outcome.stop_reason == "end_turn"
    assert list(await port.events_after(cid, logged[-1].seq)) == seen
    await port.aclose()


async def test_events_after_a_seq_before_the_loaded_tail_reads_the_gap_from_the_store() -> None:
    # A conversation loaded after a compaction holds only its tail in memory, preceded by
    # the earlier fact events (its mode): a seq in between must not skip the events the
    # tail does not hold.
    store = MemoryStore()
    long = "word " * 80
    summary = {"text": "SUMMARY: the user counted turns."}
    provider = scripted({"text": long}, loop=True, context_window=600, summary_rounds=[summary])
    first = LocalPort(make_agent(provider, store=store))
    cid = (await first.open("/tmp")).conversation_id
    await first.set_mode(cid, "read-only")  # a fact event the tail read carries
    for turn in range(8):
        outcome, _ = await _run(first, cid, f"turn {turn}")
        assert outcome.stop_reason == "end_turn"
    everything = list(await first.events_after(cid))
    assert any(isinstance(e, ev.Compaction) for e in everything)
    assert [e.seq for e in everything] == list(range(len(everything)))

    again = LocalPort(make_agent(provider, store=store))
    held = [e.seq for e in (await again.agent.load_session(cid)).log.view()]
    gap = next(s for s, t in pairwise(held) if t != s + 1)
    assert gap + 1 not in held  # loaded from the tail: seqs after the mode change are missing
    for seq in (-1, gap - 1, gap, gap + 1, held[-2] - 1, held[-1] - 1, held[-1]):
        after = list(await again.events_after(cid, seq))
        assert after == [e for e in everything if e.seq > seq], seq
