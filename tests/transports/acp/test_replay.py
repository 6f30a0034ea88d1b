"""End-to-end: `session/load` in a new process replays the whole visible conversation —
after `/compact`, after automatic compaction under a small window — and each turn in a
bounded number of updates however finely its answer was streamed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.transports.acp.harness import AcpRun, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(60)]

PROMPTS = [f"question {n}: tell me about topic {n}" for n in range(1, 5)]
ANSWERS = [f"Answer {n}. " + f"topic {n} has many words to it. " * 16 for n in range(1, 5)]
SUMMARY = {"text": "Four topics were asked about."}


def _rounds(chunk_size: int = 7) -> list[dict[str, Any]]:
    return [{"text": text, "chunk_size": chunk_size} for text in ANSWERS]


def _compactions(run: AcpRun) -> list[Any]:
    return [
        u
        for u in run.client.updates_of("agent_message_chunk")
        if (u.message_id or "").startswith("compaction-")
    ]


async def _conversation(run: AcpRun) -> tuple[list[str], list[str]]:
    """What a client shows after loading the session: its user messages and answers."""
    session_id = run.tmp.joinpath("session-id").read_text()
    run.client.updates.clear()
    await run.conn.load_session(cwd=str(run.tmp), session_id=session_id, mcp_servers=[])
    users = [u.content.text for u in run.client.updates_of("user_message_chunk")]
    answers: dict[str, str] = {}  # messageId → text, in first-seen order
    for chunk in run.client.updates_of("agent_message_chunk"):
        if not (chunk.message_id or "").startswith("compaction-"):
            answers[chunk.message_id] = answers.get(chunk.message_id, "") + chunk.content.text
    return users, list(answers.values())


async def _four_turns(run: AcpRun) -> None:
    await run.init()
    session_id = await run.new()
    run.tmp.joinpath("session-id").write_text(session_id)
    for prompt in PROMPTS:
        response = await run.prompt(session_id, prompt)
        assert response.stop_reason == "end_turn"


async def test_after_compact_a_load_in_a_new_process_replays_every_turn(tmp_path: Path) -> None:
    async with running(tmp_path, _rounds(), summary_rounds=[SUMMARY]) as run:
        await _four_turns(run)
        await run.prompt(run.tmp.joinpath("session-id").read_text(), "/compact")
        (compaction,) = _compactions(run)
        assert compaction.content.text.startswith("Compacted")
    async with running(tmp_path, []) as run:
        await run.init()
        users, answers = await _conversation(run)
    assert users == PROMPTS
    assert answers == ANSWERS


async def test_a_fork_of_a_compacted_session_keeps_every_turn(tmp_path: Path) -> None:
    async with running(tmp_path, _rounds(), summary_rounds=[SUMMARY]) as run:
        await _four_turns(run)
        await run.prompt(run.tmp.joinpath("session-id").read_text(), "/compact")
    async with running(tmp_path, []) as run:
        await run.init()
        source = run.tmp.joinpath("session-id").read_text()
        fork = await run.conn.fork_session(cwd=str(tmp_path), session_id=source)
        run.tmp.joinpath("session-id").write_text(fork.session_id)
        users, answers = await _conversation(run)
    assert users == PROMPTS
    assert answers == ANSWERS


async def test_after_automatic_compaction_a_load_replays_every_turn(tmp_path: Path) -> None:
    rounds = _rounds()
    async with running(tmp_path, rounds, context_window=700, summary_rounds=[SUMMARY] * 4) as run:
        await _four_turns(run)
        assert _compactions(run), "the small window made the session compact"
        assert all("window was nearly full" in c.content.text for c in _compactions(run))
    async with running(tmp_path, []) as run:
        await run.init()
        users, answers = await _conversation(run)
    assert users == PROMPTS
    assert answers == ANSWERS


async def test_compact_of_a_short_conversation_does_not_grow_it(tmp_path: Path) -> None:
    long_summary = {"text": "A very long summary of almost nothing at all. " * 10}
    async with running(tmp_path, [{"text": "Hi."}], summary_rounds=[long_summary]) as run:
        await run.init()
        session_id = await run.new()
        await run.prompt(session_id, "hello")
        run.client.updates.clear()
        response = await run.prompt(session_id, "/compact")
        replies = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert response.stop_reason == "end_turn"
    assert len(replies) == 1 and replies[0].startswith("Not compacted"), replies
    assert "would not be smaller" in replies[0]


async def test_a_load_replays_each_turn_in_a_few_updates(tmp_path: Path) -> None:
    turns = 12
    answer = "token " * 200  # streamed one token-sized delta at a time
    rounds = [{"text": answer, "chunk_size": 6}] * turns
    async with running(tmp_path, rounds) as run:
        await run.init()
        session_id = await run.new()
        for n in range(turns):
            await run.prompt(session_id, f"turn {n}")
        live = len(run.client.updates)
    async with running(tmp_path, []) as run:
        await run.init()
        await run.conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        replayed = run.client.updates
        texts = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert live > 200 * turns  # the live turns really streamed token by token
    assert len(replayed) <= 5 * turns + 2, [n.update.session_update for n in replayed]
    assert texts == [answer] * turns
