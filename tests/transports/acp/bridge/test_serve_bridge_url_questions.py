"""`serve --acp-agent` with our own agent as the child: the child's url-mode
`elicitation/create` (the model's `ask_user` with a url; the bridge advertises url
elicitation) is an AG-UI interrupt with the page in its metadata, the next run's accept
answers the child, and the child's `elicitation/complete` is CUSTOM
`steerable.question_completed` before the call's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.transports.acp.bridge.harness import bridged, last, run_input, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PAGE = "https://example.com/oauth/authorize?state=child"
OPEN = {
    "tool_calls": [
        {
            "id": "q1",
            "name": "ask_user",
            "arguments": {"message": "Authorize, then come back.", "url": PAGE},
        }
    ]
}


def _answer(interrupt_id: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]


def test_the_childs_url_question_is_an_interrupt_and_its_completion_reaches_the_client(
    tmp_path: Path,
) -> None:
    with bridged(tmp_path, [OPEN, {"text": "Connected."}]) as bridge:
        first = bridge.run(run_input("t1", "r1", "connect my calendar"))
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt", first[-1]
        (interrupt,) = outcome["interrupts"]
        assert (interrupt["id"], interrupt["toolCallId"]) == ("question-q1", "q1")
        assert interrupt["metadata"] == {"mode": "url", "url": PAGE}
        assert set(interrupt["responseSchema"]["properties"]) == {"action"}
        second = bridge.run(
            run_input("t1", "r2", resume=_answer(interrupt["id"], {"action": "accept"}))
        )
    assert second[-1]["outcome"] == {"type": "success"}, second[-1]
    names = [e.get("name") or e["type"] for e in second]
    completed = names.index("steerable.question_completed")
    assert names.index("steerable.question_answered") < completed
    assert completed < names.index("TOOL_CALL_RESULT")
    assert second[completed]["value"]["question_id"] == "question-q1"
    result = last(second, "TOOL_CALL_RESULT")  # what the child's model read
    assert PAGE in result["content"] and '"action":"accept"' in result["content"]
    assert text_of(second) == "Connected."


def test_a_declined_url_question_is_never_completed(tmp_path: Path) -> None:
    with bridged(tmp_path, [OPEN, {"text": "Fine."}]) as bridge:
        first = bridge.run(run_input("t1", "r1", "connect my calendar"))
        (interrupt,) = first[-1]["outcome"]["interrupts"]
        second = bridge.run(
            run_input("t1", "r2", resume=_answer(interrupt["id"], {"action": "decline"}))
        )
    assert not [e for e in second if e.get("name") == "steerable.question_completed"]
    assert '"action":"decline"' in last(second, "TOOL_CALL_RESULT")["content"]
