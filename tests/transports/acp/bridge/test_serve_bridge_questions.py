"""`serve --acp-agent` with our own agent as the child: the child's `elicitation/create`
(the model's `ask_user`) is an AG-UI interrupt carrying its form, and the next run's
`resume[]` answers the child's still-pending request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.transports.acp.bridge.harness import bridged, kinds, last, run_input, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SCHEMA = {
    "type": "object",
    "properties": {"size": {"type": "string", "enum": ["small", "large"]}},
    "required": ["size"],
}
ASK = {
    "tool_calls": [
        {"id": "q1", "name": "ask_user", "arguments": {"message": "Size?", "schema": SCHEMA}}
    ]
}


def _answer(interrupt_id: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]


@pytest.mark.parametrize(
    ("payload", "seen"),
    [
        ({"action": "accept", "content": {"size": "large"}}, '"content":{"size":"large"}'),
        ({"action": "decline"}, '"action":"decline"'),
    ],
)
def test_the_childs_question_is_an_interrupt_and_resume_answers_it(
    tmp_path: Path, payload: dict[str, Any], seen: str
) -> None:
    with bridged(tmp_path, [ASK, {"text": "Thanks."}]) as bridge:
        first = bridge.run(run_input("t1", "r1", "make a poster"))
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt", first[-1]
        (interrupt,) = outcome["interrupts"]
        assert interrupt["id"] == "question-q1"  # named after the child's tool call
        assert (interrupt["reason"], interrupt["toolCallId"]) == ("Size?", "q1")
        assert interrupt["responseSchema"]["properties"]["content"] == SCHEMA
        asked = [e for e in first if e.get("name") == "steerable.question_asked"]
        assert asked and asked[0]["value"]["call_id"] == "q1"
        second = bridge.run(run_input("t1", "r2", resume=_answer(interrupt["id"], payload)))
    assert second[-1]["outcome"] == {"type": "success"}, second[-1]
    answered = [e for e in second if e.get("name") == "steerable.question_answered"]
    assert [a["value"]["action"] for a in answered] == [payload["action"]]
    result = last(second, "TOOL_CALL_RESULT")  # the child's tool result: what its model read
    assert result["toolCallId"] == "q1" and seen in result["content"]
    assert text_of(second) == "Thanks."


def test_a_new_message_instead_of_an_answer_cancels_the_childs_question(tmp_path: Path) -> None:
    with bridged(tmp_path, [ASK, {"text": "Fine."}], loop=True) as bridge:
        first = bridge.run(run_input("t1", "r1", "make a poster"))
        assert first[-1]["outcome"]["type"] == "interrupt"
        second = bridge.run(run_input("t1", "r2", "never mind"))
    answered = [e for e in second if e.get("name") == "steerable.question_answered"]
    assert [a["value"]["action"] for a in answered] == ["cancel"]
    assert second[-1]["type"] == "RUN_FINISHED"
    assert "RUN_ERROR" not in kinds(second)
