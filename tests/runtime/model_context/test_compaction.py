"""Compaction through real sessions: pressure, overflow recovery, micro, manual, breakers."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.model_context.compaction import CompactionSettings
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.model_context.tokens import estimate_request_tokens
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.ports.storage import read_tail
from steerable_bridge.runtime.turns.turn import TurnInput
from tests.runtime.harness import kinds, make_agent, of, prompt, scripted, text_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LONG = "word " * 80  # about 100 tokens
SUMMARY = {"text": "SUMMARY: the user counted turns; the assistant answered each."}


def requests(session: Session) -> list[ModelRequest]:
    return [e.request for e in of(list(session.log.view()), ev.ModelRequestEvent)]


def compactions(session: Session) -> list[ev.Compaction]:
    return of(list(session.log.view()), ev.Compaction)


async def test_pressure_compacts_before_the_window_fills_and_keeps_the_last_turn() -> None:
    provider = scripted(
        {"text": LONG}, loop=True, context_window=1200, overflow_at=1200, summary_rounds=[SUMMARY]
    )
    agent = make_agent(provider)
    session = await agent.new_session("/work")
    for turn in range(30):
        outcome, _ = await prompt(session, f"turn {turn}")
        assert outcome.stop_reason == "end_turn", outcome.error_message
    done = compactions(session)
    assert len(done) >= 3
    assert {c.trigger for c in done} == {"pressure"}
    assert all(c.post_tokens < c.pre_tokens and not c.fallback for c in done)
    assert all(c.pre_tokens > 0.8 * 1200 >= c.post_tokens for c in done)
    assert not session.compactor.circuit_open
    for request in requests(session):
        assert estimate_request_tokens(request) <= 1200
    last = requests(session)[-1]
    texts = [m.text for m in last.messages]
    assert texts[0].startswith("Summary of the conversation so far:\nSUMMARY:")
    assert texts[-1] == "turn 29" and "turn 28" in texts  # the previous turn stays verbatim


async def test_a_resumed_session_sees_exactly_what_the_model_saw() -> None:
    store = MemoryStore()
    provider = scripted({"text": LONG}, loop=True, context_window=600, summary_rounds=[SUMMARY])
    session = await make_agent(provider, store=store).new_session("/work")
    for turn in range(8):
        await prompt(session, f"turn {turn}")
    assert compactions(session)
    tail = await read_tail(store, session.id)
    assert len(tail) < len(session.log)
    assert project_history(tail) == project_history(session.log.view())
    again = await make_agent(provider, store=store).load_session(session.id)
    outcome, _ = await prompt(again, "after reload")
    assert outcome.stop_reason == "end_turn"
    assert requests(again)[-1].messages[0].text.startswith("Summary of the conversation")


async def test_a_failed_summary_call_falls_back_to_the_digest() -> None:
    provider = scripted(
        {"text": LONG},
        loop=True,
        context_window=600,
        summary_rounds=[{"error": {"code": "server_error", "message": "down"}}],
    )
    session = await make_agent(provider).new_session("/work")
    for turn in range(6):
        outcome, _ = await prompt(session, f"please count to {turn}")
        assert outcome.stop_reason == "end_turn"
    first = compactions(session)[0]
    assert first.fallback
    assert "The user asked:" in first.summary and "please count to 0" in first.summary


async def test_overflow_recovery_compacts_once_and_retries_the_step() -> None:
    # The route does not know its window: only the server's refusal reveals it.
    provider = scripted({"text": LONG}, loop=True, overflow_at=450, summary_rounds=[SUMMARY])
    session = await make_agent(provider).new_session("/work")
    for turn in range(10):
        outcome, _ = await prompt(session, f"turn {turn}")
        assert outcome.stop_reason == "end_turn", outcome.error_message
    done = compactions(session)
    assert done and {c.trigger for c in done} == {"overflow"}
    recovered = next(c.seq for c in done)
    step = [e for e in session.log.view() if e.seq > recovered][:2]
    assert kinds(step) == ["model_request", "text_start"]  # the same step, retried


async def test_overflow_that_compaction_cannot_fix_fails_with_a_specific_code() -> None:
    provider = scripted({"text": "ok"}, loop=True, overflow_at=20, summary_rounds=[SUMMARY])
    session = await make_agent(provider).new_session("/work")
    outcome, seen = await prompt(session, "hello")
    assert outcome.error_code == "context_overflow_after_compaction"
    assert "new session" in (outcome.error_message or "")
    assert of(seen, ev.RunFailed)[0].code == "context_overflow_after_compaction"


async def test_with_compaction_off_an_overflow_fails_as_context_overflow() -> None:
    provider = scripted({"text": "ok"}, loop=True, overflow_at=20)
    agent = make_agent(provider, compaction=CompactionSettings(enabled=False))
    outcome, _ = await prompt(await agent.new_session("/work"), "hello")
    assert outcome.error_code == "context_overflow"


async def test_micro_compaction_folds_old_tool_results_every_n_steps() -> None:
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "arguments": {"text": f"out{i} " * 50}}]}
        for i in range(6)
    ]
    provider = scripted(*rounds, {"text": "done"})
    session = await make_agent(
        provider,
        tools=[text_tool("echo")],
        compaction=CompactionSettings(micro_every=3, micro_keep=2),
    ).new_session("/work")
    outcome, _ = await prompt(session, "go")
    assert outcome.stop_reason == "end_turn"
    micro = compactions(session)
    assert micro and {c.trigger for c in micro} == {"micro"}
    assert all(c.scope == "tool_results" and c.post_tokens < c.pre_tokens for c in micro)
    tool_messages = [m for m in requests(session)[-1].messages if m.role == "tool"]
    folded = [m for m in tool_messages if m.text.startswith("[folded tool result:")]
    # At step 3 only two results exist (kept); at step 6 all but the newest two are folded.
    assert len(tool_messages) == 6 and len(folded) == 3
    assert [m.tool_call_id for m in tool_messages if m not in folded] == ["c3", "c4", "c5"]


async def test_manual_compaction_between_turns_runs_without_a_model_call() -> None:
    provider = scripted({"text": LONG}, loop=True, summary_rounds=[SUMMARY])
    session = await make_agent(provider).new_session("/work")
    await prompt(session, "first")
    await prompt(session, "second")
    before = len(requests(session))
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)

    with anyio.fail_after(10):
        outcome = await session.prompt(TurnInput(compact=True), sink)
    assert outcome.stop_reason == "end_turn"
    assert kinds(seen) == [
        "run_started",
        "compaction_started",
        "compaction_summary_delta",  # the scripted model sends the summary in one piece
        "compaction",
        "run_finished",
    ]
    assert of(seen, ev.Compaction)[0].trigger == "manual"
    assert len(requests(session)) == before
    await prompt(session, "third")
    texts = [m.text for m in requests(session)[-1].messages]
    assert texts[0].startswith("Summary of the conversation so far:\nSUMMARY")


async def test_manual_compaction_reaches_a_running_turn_at_its_next_step() -> None:
    provider = scripted(
        {"text": LONG},
        {"tool_calls": [{"id": "c1", "name": "echo", "arguments": {"text": "x"}}]},
        {"text": "done"},
        summary_rounds=[SUMMARY],
    )
    session = await make_agent(provider, tools=[text_tool("echo")]).new_session("/work")
    await prompt(session, "first")

    def on_event(event: ev.LoopEvent) -> None:
        if isinstance(event, ev.ToolStarted):
            assert session.request_compact()

    await prompt(session, "second", on_event=on_event)
    done = compactions(session)
    assert [c.trigger for c in done] == ["manual"]
    assert not session.request_compact()  # idle: the transport runs a compact turn instead


async def test_ineffective_compactions_open_the_circuit_with_a_notice() -> None:
    # A window smaller than the system prompt: no compaction can ever bring it under.
    provider = scripted({"text": "ok"}, loop=True, context_window=40, summary_rounds=[SUMMARY])
    session = await make_agent(provider).new_session("/work")
    for turn in range(6):
        outcome, _ = await prompt(session, f"turn {turn}")
        assert outcome.stop_reason == "end_turn"
    done = compactions(session)
    assert len(done) == 3
    assert [bool(c.notice) for c in done] == [False, False, True]
    assert "paused" in done[-1].notice
    assert session.compactor.circuit_reason == "consecutive_failures"
    assert done[-1].notice in requests(session)[-1].messages[0].text  # the model is told
    events = list(session.log.view())
    (notice,) = of(events, ev.Notice)  # and the user, once, right after the compaction
    assert events[events.index(done[-1]) + 1] == notice
    assert notice.severity == "warning" and notice.title == "Automatic compaction is paused"
    assert notice.description == done[-1].notice
    assert all(notice.description not in m.text for m in requests(session)[-1].messages[1:])
    await session.prompt(TurnInput(compact=True))  # manual compaction resets the breaker
    assert not session.compactor.circuit_open


async def test_rapid_refills_open_the_circuit() -> None:
    provider = scripted(
        {"text": LONG * 3}, loop=True, context_window=1000, summary_rounds=[SUMMARY]
    )
    session = await make_agent(provider).new_session("/work")
    for turn in range(14):
        outcome, _ = await prompt(session, f"turn {turn}")
        assert outcome.stop_reason == "end_turn"
    assert session.compactor.circuit_reason == "rapid_refill"
    notices = [c.notice for c in compactions(session) if c.notice]
    assert len(notices) == 1 and "refilled" in notices[0]


async def test_a_summary_request_is_one_off_and_offers_no_tools() -> None:
    seen: list[ModelRequest] = []
    provider = scripted({"text": LONG}, loop=True, context_window=600, summary_rounds=[SUMMARY])
    original = provider.stream

    def spy(request: ModelRequest) -> Any:
        seen.append(request)
        return original(request)

    provider.stream = spy  # type: ignore[method-assign]
    session = await make_agent(provider).new_session("/work")
    for turn in range(6):
        await prompt(session, f"turn {turn}")
    summaries = [r for r in seen if r.one_off]
    assert summaries and all(not r.tools and r.max_tokens for r in summaries)
    text = summaries[0].messages[0].text  # the folded turns as plain text, within budget
    assert text.startswith("Conversation to summarize:") and "[user]\nturn 2" in text
    assert estimate_request_tokens(summaries[0]) + (summaries[0].max_tokens or 0) <= 600
