"""Model requests on AG-UI: the thread's first whole, each later one by reference to the one
before (also after a restart), whole on request; the fast path and the renderer agree, and
the conformance decoder rebuilds every one exactly."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from steerable_bridge.conformance import decode_agui
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.model_context.tokens import estimate_request_tokens
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import Message, TextPart
from steerable_bridge.transports.agui.app import create_app
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.requests import RequestChain, system_digest, tools_digest
from steerable_bridge.transports.agui.threads import Thread
from steerable_bridge.transports.agui.wire import SseEncoder
from tests.transports.agui.decoding import frames
from tests.transports.agui.harness import agent_for, asgi_client, post, run_input, user

pytestmark = pytest.mark.anyio

TOOLS = (ToolSpec(name="calc", description="adds numbers", parameters_json='{"type":"object"}'),)


def _said(i: int) -> Message:
    return Message(id=f"m{i}", role="user", content=(TextPart(text=f"message {i} " * 20),))


def _request(seq: int, messages: int, *, system: str = "be brief") -> ev.ModelRequestEvent:
    request = ModelRequest(
        model="test:m",
        system=system,
        messages=tuple(_said(i) for i in range(messages)),
        tools=TOOLS,
        max_tokens=100,
    )
    return ev.ModelRequestEvent(session_id="t", run_id="r", seq=seq, ts=5, step=1, request=request)


def _value(chain: RequestChain, event: ev.ModelRequestEvent, **kw: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(chain.value_json(event, **kw))
    return value


def _custom(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": "steerable.model_request", "value": value}


def _start(seq: int) -> dict[str, Any]:
    derived = {"steerable": {"derived": True}}
    return {"type": "RUN_STARTED", "threadId": "t", "runId": f"run-{seq}", "metadata": derived}


def test_the_first_request_is_the_whole_event() -> None:
    first = _request(1, 3)
    assert _value(RequestChain(), first) == codec.event_to_jsonable(first)


def test_a_next_request_carries_what_is_new_and_decodes_to_the_whole() -> None:
    chain = RequestChain()
    first, second = _request(1, 3), _request(9, 5)
    whole = _value(chain, first)
    value = _value(chain, second)
    assert [m["id"] for m in value["request"]["messages"]] == ["m3", "m4"]  # the new ones
    assert "system" not in value["request"] and "tools" not in value["request"]
    assert value["request"]["model"] == "test:m"  # what the chat page's timeline reads
    assert value["request_ref"] == {
        "base": 1,
        "prefix": 3,
        "messages": 5,
        "tokens": estimate_request_tokens(second.request),
        "system": system_digest("be brief"),
        "tools": tools_digest(TOOLS),
    }
    assert len(json.dumps(value)) < len(json.dumps(whole))  # smaller than the first
    decoded = decode_agui([_start(0), _custom(whole), _custom(value)])
    assert decoded == [first, second]


def test_a_changed_system_prompt_is_written_out_and_a_new_history_shares_no_prefix() -> None:
    chain = RequestChain()
    first = _request(1, 3)
    compacted = dataclasses.replace(
        _request(4, 2, system="be thorough"),
        request=dataclasses.replace(
            _request(4, 2, system="be thorough").request, messages=(_said(7), _said(2))
        ),
    )
    whole = _value(chain, first)
    value = _value(chain, compacted)
    assert value["request"]["system"] == "be thorough" and "tools" not in value["request"]
    assert value["request_ref"]["prefix"] == 0 and value["request_ref"]["base"] == 1
    assert len(value["request"]["messages"]) == 2
    assert decode_agui([_start(0), _custom(whole), _custom(value)]) == [first, compacted]


def test_whole_requests_on_request_and_the_chain_goes_on_from_them() -> None:
    chain = RequestChain()
    first, second, third = _request(1, 2), _request(5, 3), _request(8, 4)
    _value(chain, first)
    assert _value(chain, second, full=True) == codec.event_to_jsonable(second)
    assert _value(chain, third)["request_ref"]["base"] == 5  # the whole one is the base


def test_after_a_restart_the_first_request_refers_to_the_one_in_the_log() -> None:
    """A thread read back from the log (a new process) knows its newest request, so its
    next run's first request goes by reference too."""
    logged = [
        ev.RunStarted(session_id="t", run_id="r", seq=0, ts=1, model="test:m"),
        _request(1, 3),
        ev.RunFinished(session_id="t", run_id="r", seq=2, ts=2, stop_reason="end_turn"),
    ]
    thread = Thread("t")
    thread.take(logged)
    renderer = AguiRenderer(thread_id="t", run_id="run-2", requests=thread.requests)
    encoder = SseEncoder(renderer)
    encoder.encode(ev.RunStarted(session_id="t", run_id="r2", seq=3, ts=3, model="test:m"))
    wire = frames(encoder.encode(_request(4, 5)))
    assert wire[0]["value"]["request_ref"]["base"] == 1
    thread.forget()  # forgotten: read again from the log before its next run
    assert thread.requests.base is None


def test_the_fast_path_and_the_renderer_send_the_same_bytes() -> None:
    start = ev.RunStarted(session_id="t", run_id="r", seq=0, ts=1, model="test:m")
    for full in (False, True):
        fast = SseEncoder(AguiRenderer(thread_id="t", run_id="x", full_requests=full))
        slow = SseEncoder(AguiRenderer(thread_id="t", run_id="x", full_requests=full))
        fast.encode(start)
        slow.encode_models(slow.renderer.render(start), seq=0)
        for event in (_request(1, 3), _request(4, 5)):
            wanted = slow.encode_models(slow.renderer.render(event), seq=event.seq)
            assert fast.encode(event) == wanted
            assert fast.encode(event) == wanted  # the same event twice: the same bytes


async def test_runs_send_requests_by_reference_unless_the_client_asks_for_them_whole() -> None:
    app = create_app(LocalPort(agent_for()))
    whole = {"steerable": {"full_requests": True}}
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hi")]))
        _, second = await post(client, run_input("t1", "r2", [user("u2", "again")]))
        more = run_input("t1", "r3", [user("u3", "more")], forwardedProps=whole)
        _, full = await post(client, more)
        wrong = {"steerable": {"full_requests": 1}}
        bad, _ = await post(client, run_input("t1", "r4", [user("u4", "x")], forwardedProps=wrong))
    values = [
        [f["value"] for f in wire if f.get("name") == "steerable.model_request"]
        for wire in (first, second, full)
    ]
    assert "request_ref" not in values[0][0]  # the thread's first
    ref = values[1][0]["request_ref"]
    assert ref["base"] == values[0][-1]["seq"] and ref["prefix"] == 1  # [u1]
    new = values[1][0]["request"]["messages"]  # the answer to u1, then u2
    assert [m["role"] for m in new] == ["assistant", "user"] and new[-1]["id"] == "u2"
    assert all("request_ref" not in v for v in values[2])
    assert len(values[2][0]["request"]["messages"]) == 5
    assert bad.status_code == 422 and "full_requests" in bad.json()["error"]["message"]
    logged = [e for e in decode_agui([*first, *second, *full]) if e.kind == "model_request"]
    assert len(logged) == 3
