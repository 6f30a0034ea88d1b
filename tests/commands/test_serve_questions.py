"""`serve` over HTTP: the model's question ends the run with an AG-UI interrupt carrying the
form's schema, and the next run's `resume[]` answers it (accept with content / decline)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from .serve_child import frames, started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SCHEMA = {
    "type": "object",
    "properties": {"size": {"type": "string", "enum": ["small", "large"]}},
    "required": ["size"],
}
ROUNDS = [
    {
        "tool_calls": [
            {"id": "q1", "name": "ask_user", "arguments": {"message": "Size?", "schema": SCHEMA}}
        ]
    },
    {"text": "ok"},
]


def _body(run: str, **extra: object) -> dict[str, object]:
    messages = [{"id": "u1", "role": "user", "content": "make a poster"}]
    return {"threadId": "t1", "runId": run, "protocolVersion": "1.0", "messages": messages, **extra}


@pytest.mark.parametrize(
    ("payload", "seen"),
    [
        ({"action": "accept", "content": {"size": "large"}}, '"content":{"size":"large"}'),
        ({"action": "decline"}, '"action":"decline"'),
    ],
)
def test_a_question_is_an_interrupt_answered_by_resume(
    tmp_path: Path, payload: dict[str, object], seen: str
) -> None:
    script = tmp_path / "ask.json"
    script.write_text(json.dumps({"rounds": ROUNDS}))
    with (
        started(["--model", f"scripted:{script}"]) as (base, _),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        first = frames(client.post("/agent", json=_body("r1")).text)
        outcome = first[-1]["outcome"]
        assert first[-1]["type"] == "RUN_FINISHED" and outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == (
            "question-q1",
            "Size?",
            "q1",
        )
        answer = interrupt["responseSchema"]
        assert answer["properties"]["content"] == SCHEMA
        assert answer["properties"]["action"] == {"enum": ["accept", "decline", "cancel"]}
        asked = [f for f in first if f.get("name") == "steerable.question_asked"]
        assert asked and asked[0]["value"]["schema_json"] == json.dumps(
            SCHEMA, separators=(",", ":")
        )

        resume = [{"interruptId": "question-q1", "status": "resolved", "payload": payload}]
        second = frames(client.post("/agent", json=_body("r2", resume=resume)).text)
    result = next(f for f in second if f["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "q1" and seen in result["content"]
    answered = next(f for f in second if f.get("name") == "steerable.question_answered")
    assert answered["value"]["action"] == payload["action"]
    assert second[-1]["type"] == "RUN_FINISHED" and second[-1]["outcome"] == {"type": "success"}


def test_a_resume_with_an_unknown_action_is_refused_with_a_remedy(tmp_path: Path) -> None:
    script = tmp_path / "ask.json"
    script.write_text(json.dumps({"rounds": ROUNDS}))
    with (
        started(["--model", f"scripted:{script}"]) as (base, _),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        client.post("/agent", json=_body("r1"))
        resume = [{"interruptId": "question-q1", "status": "resolved", "payload": {"ok": 1}}]
        refused = client.post("/agent", json=_body("r2", resume=resume))
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "invalid_resume" and '"action"' in error["message"]
