"""`serve` over HTTP: a url question ends the run with an interrupt whose metadata carries
the page (`{mode: url, url}`) and whose answer schema is `{action}` only; the thread shows
the same interrupt, and an accept in `resume[]` completes it before the call's result."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from .serve_child import frames, started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PAGE = "https://example.com/consent?state=s1"
ROUNDS = [
    {
        "tool_calls": [
            {
                "id": "q1",
                "name": "ask_user",
                "arguments": {"message": "Approve access, then come back.", "url": PAGE},
            }
        ]
    },
    {"text": "ok"},
]


def _body(run: str, **extra: object) -> dict[str, object]:
    messages = [{"id": "u1", "role": "user", "content": "sync my calendar"}]
    return {"threadId": "t1", "runId": run, "protocolVersion": "1.0", "messages": messages, **extra}


def test_a_url_question_is_an_interrupt_with_the_page_completed_by_resume(
    tmp_path: Path,
) -> None:
    script = tmp_path / "ask.json"
    script.write_text(json.dumps({"rounds": ROUNDS}))
    with (
        started(["--model", f"scripted:{script}"]) as (base, _),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        first = frames(client.post("/agent", json=_body("r1")).text)
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        assert (interrupt["id"], interrupt["toolCallId"]) == ("question-q1", "q1")
        assert interrupt["metadata"] == {"mode": "url", "url": PAGE}
        assert interrupt["responseSchema"]["properties"] == {
            "action": {"enum": ["accept", "decline", "cancel"]}
        }
        thread = client.get("/agent/threads/t1").json()
        assert thread["interrupts"] == [interrupt]

        resume = [
            {"interruptId": "question-q1", "status": "resolved", "payload": {"action": "accept"}}
        ]
        second = frames(client.post("/agent", json=_body("r2", resume=resume)).text)
    names = [f.get("name") or f["type"] for f in second]
    completed = names.index("steerable.question_completed")
    assert names.index("steerable.question_answered") < completed < names.index("TOOL_CALL_RESULT")
    assert second[completed]["value"]["question_id"] == "question-q1"
    result = next(f for f in second if f["type"] == "TOOL_CALL_RESULT")
    assert PAGE in result["content"] and '"action":"accept"' in result["content"]
