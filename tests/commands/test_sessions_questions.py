"""`sessions show` and `--timeline` print the questions a session asked and their answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.cli import main
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.questions import ASK_USER_NAME, QuestionAnswer
from steerable_bridge.runtime.turns.turn import QuestionReply, TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted

ASK: dict[str, Any] = {
    "tool_calls": [
        {
            "id": "q1",
            "name": ASK_USER_NAME,
            "arguments": {
                "message": "Which colour?",
                "schema": {"type": "object", "properties": {"colour": {"type": "string"}}},
            },
        }
    ]
}


PAGE = "https://example.com/consent"
OPEN: dict[str, Any] = {
    "tool_calls": [
        {"id": "q1", "name": ASK_USER_NAME, "arguments": {"message": "Approve it", "url": PAGE}}
    ]
}


def _seed(db: Path, *, answer: bool, ask: dict[str, Any] = ASK) -> str:
    async def seed() -> str:
        with anyio.fail_after(20):
            return await seeded()

    async def seeded() -> str:
        store = SqliteStore(db)
        port = LocalPort(make_agent(scripted(ask, {"text": "fine"}, loop=True), store=store))  # type: ignore[arg-type]
        try:

            async def sink(event: ev.LoopEvent) -> None:
                pass

            cid = (await port.open("/tmp")).conversation_id
            await port.prompt(cid, TurnInput(content=(TextPart(text="paint it"),)), sink)
            if answer:
                content = '{"colour":"teal"}' if ask is ASK else None
                reply = QuestionReply(
                    question_id="question-q1",
                    answer=QuestionAnswer(action="accept", content_json=content),
                )
                await port.prompt(cid, TurnInput(answers=(reply,)), sink)
            return cid
        finally:
            await port.aclose()
            store.close()

    return anyio.run(seed)


@pytest.mark.parametrize("answer", [True, False])
def test_sessions_show_prints_each_question_and_its_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: bool
) -> None:
    db = tmp_path / "s.db"
    cid = _seed(db, answer=answer)
    capsys.readouterr()
    assert main(["sessions", "show", cid, "--storage", str(db)]) == 0
    out = capsys.readouterr().out
    expected = 'accepted {"colour":"teal"}' if answer else "waiting for an answer"
    assert f"question  Which colour? -> {expected}" in out
    assert main(["sessions", "show", cid, "--storage", str(db), "--timeline"]) == 0
    assert "question" in capsys.readouterr().out


def test_sessions_show_prints_a_url_question_opened_and_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    cid = _seed(db, answer=True, ask=OPEN)
    capsys.readouterr()
    assert main(["sessions", "show", cid, "--storage", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"question  Approve it -> accepted (opened {PAGE}, completed)" in out
    assert main(["sessions", "show", cid, "--storage", str(db), "--timeline"]) == 0
    assert "question (url)" in capsys.readouterr().out
