"""The fake model servers speak each provider's streaming wire and follow their script.

A real SSE parser (httpx-sse) reads what `fake_models.py` sends on each of the three wires;
the tests check the event order a client relies on (Chat Completions chunks then `[DONE]`;
Responses `response.created` … `response.completed`; Messages `message_start` …
`message_stop`), that the streamed pieces add up to the scripted text or tool arguments,
that the tool call comes only after the trigger and the after-tool answer only once the
tool result is the newest message, and that the record keeps the tool result's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from tests.interop.fake_models import FakeModel, FakeModelServer, serve_fake_models

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeModelServer]:
    with serve_fake_models(FakeModel()) as server:
        yield server


@pytest.fixture
def client(fake: FakeModelServer) -> Iterator[httpx.Client]:
    fake.model.reset()
    with httpx.Client(base_url=fake.url, timeout=20) as http:
        yield http


def _stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    with connect_sse(client, "POST", path, json=body) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [(sse.event, sse.data) for sse in source.iter_sse()]


def test_chat_completions_streams_text_then_a_tool_call_then_the_answer(
    client: httpx.Client, fake: FakeModelServer
) -> None:
    model = fake.model
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    body: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": tools,
        "messages": [{"role": "user", "content": "hi"}],
    }
    events = _stream(client, "/chat/completions", body)
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == model.text
    assert chunks[-1]["usage"]["total_tokens"] > 0 and chunks[-1]["choices"] == []

    body["messages"] = [{"role": "user", "content": f"do {model.trigger}"}]
    chunks = [json.loads(d) for _, d in _stream(client, "/chat/completions", body)[:-1]]
    calls = [c["choices"][0]["delta"].get("tool_calls") for c in chunks if c["choices"]]
    parts = [call[0] for call in calls if call]
    assert parts[0]["function"]["name"] == "lookup" and parts[0]["id"]
    arguments = "".join(p["function"].get("arguments", "") for p in parts)
    assert json.loads(arguments) == {"topic": "fake"}
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"

    body["messages"] += [
        {"role": "assistant", "tool_calls": [{"id": parts[0]["id"], "type": "function"}]},
        {"role": "tool", "tool_call_id": parts[0]["id"], "content": "42 it is"},
    ]
    answer = client.post("/chat/completions", json={**body, "stream": False}).json()
    assert answer["choices"][0]["message"]["content"] == model.after_tool
    assert model.requests[-1].tool_results == ("42 it is",)
    assert model.saw_tool_result()


def test_responses_streams_the_events_codex_reads(
    client: httpx.Client, fake: FakeModelServer
) -> None:
    model = fake.model
    body: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                   "text": model.trigger}]}],
    }  # fmt: skip
    events = _stream(client, "/responses", body)
    kinds = [name for name, _ in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-2:] == ["response.output_item.done", "response.completed"]
    payloads = [json.loads(data) for _, data in events]
    assert all(p["type"] == name for (name, _), p in zip(events, payloads, strict=True))
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    item = payloads[-2]["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    deltas = "".join(p["delta"] for p in payloads if p["type"].endswith("arguments.delta"))
    assert json.loads(deltas) == json.loads(item["arguments"])
    assert payloads[-1]["response"]["usage"]["total_tokens"] > 0

    body["input"] += [item, {"type": "function_call_output", "call_id": item["call_id"],
                             "output": "exit 0"}]  # fmt: skip
    payloads = [json.loads(data) for _, data in _stream(client, "/responses", body)]
    text = "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")
    assert text == model.after_tool
    assert payloads[-2]["item"]["content"][0]["text"] == model.after_tool
    assert model.requests[-1].tool_results == ("exit 0",)


def test_messages_streams_the_anthropic_grammar_with_a_tool_use_block(
    client: httpx.Client, fake: FakeModelServer
) -> None:
    model = fake.model
    body: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "max_tokens": 100,
        "tools": [{"name": "Bash", "input_schema": {}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": model.trigger}]}],
    }
    events = _stream(client, "/messages", body)
    kinds = [name for name, _ in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    payloads = [json.loads(data) for _, data in events]
    block = payloads[1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash"
    partial = "".join(
        p["delta"]["partial_json"] for p in payloads if p["type"] == "content_block_delta"
    )
    assert json.loads(partial)["command"].startswith("touch ")
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"
    assert payloads[0]["message"]["usage"]["cache_read_input_tokens"] == 0

    body["messages"] += [
        {"role": "assistant", "content": [{**block, "input": json.loads(partial)}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"],
                                      "content": [{"type": "text", "text": "done"}]}]},
    ]  # fmt: skip
    payloads = [json.loads(data) for _, data in _stream(client, "/messages", body)]
    text = "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta")
    assert text == model.after_tool
    assert payloads[-2]["delta"]["stop_reason"] == "end_turn"
    assert model.requests[-1].tool_results == ("done",)
    assert model.requests[-1].last_user_text == model.trigger


def test_the_cancel_probes_long_prompt_gets_a_long_slow_answer(
    client: httpx.Client, fake: FakeModelServer
) -> None:
    model = fake.model
    body = {"model": "m", "messages": [{"role": "user", "content": f"please {model.long_marker}"}]}
    answer = client.post("/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == model.long_text
    assert model.requests[-1].reply.pace == model.long_pace > 0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
        ("/responses", {"input": [{"role": "user", "content": "x"}]}),
        ("/messages", {"messages": [{"role": "user", "content": "x"}]}),
    ],
)
def test_the_fail_marker_gets_an_invalid_request_error_on_every_wire(
    client: httpx.Client, fake: FakeModelServer, path: str, body: dict[str, Any]
) -> None:
    failing = json.loads(json.dumps(body).replace('"x"', json.dumps(fake.model.fail_marker)))
    answer = client.post(path, json={"model": "m", "stream": True, **failing})
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
    plain = client.post(path, json={"model": "m", "stream": True, **body})
    assert plain.status_code == 200
