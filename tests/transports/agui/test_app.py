"""The AG-UI app over httpx's ASGI transport: every feature a web UI uses, and the HTTP rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from steerable_bridge.adapters.llm.scripted import ScriptedProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
)
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import scripted
from tests.transports.agui.decoding import decode
from tests.transports.agui.harness import (
    WRITTEN,
    agent_for,
    asgi_client,
    post,
    run_input,
    session_of,
    types,
    until,
    user,
)

pytestmark = pytest.mark.anyio

JSON_TYPE = {"content-type": "application/json"}


async def test_health_and_chat_page() -> None:
    async with asgi_client(create_app(LocalPort(agent_for()))) as client:
        health = (await client.get("/health")).json()
        page = await client.get("/")
        script = await client.get("/static/app.js")
        style = await client.get("/static/chat.css")
        marked = await client.get("/static/vendor/marked-15.0.12.min.js")
        licence = await client.get("/static/vendor/dompurify-LICENSE")
        missing = await client.get("/static/nothing.js")
        outside = await client.get("/static/../app.py")
    assert health["status"] == "ok" and health["protocolVersion"] == "1.0"
    assert {"calculate", "update_plan", "update_state", "write_file"} <= set(health["tools"])
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp
    assert "<script>" not in page.text and "style=" not in page.text  # nothing inline
    assert 'src="static/app.js"' in page.text and 'src="static/vendor/purify' in page.text
    assert 'call("health")' in script.text  # suggestions follow the tools offered
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert style.headers["content-type"] == "text/css; charset=utf-8"
    assert script.headers["x-content-type-options"] == "nosniff"
    assert marked.status_code == 200 and "marked v15.0.12" in marked.text
    assert licence.status_code == 200 and "Apache License" in licence.text
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert outside.status_code == 404


async def test_health_lists_only_the_tools_this_server_has() -> None:
    from steerable_bridge.adapters.llm.demo import DemoProvider
    from steerable_bridge.adapters.tools.builtin import builtin_tools
    from tests.runtime.harness import make_agent

    agent = make_agent(DemoProvider(pace_ms=0), tools=builtin_tools(shared_state=True))
    async with asgi_client(create_app(LocalPort(agent))) as client:
        health = (await client.get("/health")).json()
    assert "write_file" not in health["tools"] and "calculate" in health["tools"]


async def test_a_run_streams_reasoning_tool_call_and_text_and_decodes_to_the_log() -> None:
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        body = run_input("t1", "r1", [user("u1", "think, then use a tool")], state={})
        response, wire = await post(client, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    kinds = types(wire)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED" and "RUN_ERROR" not in kinds
    for expected in (
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STEP_STARTED",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
    ):
        assert expected in kinds, expected
    assert kinds.count("TOOL_CALL_ARGS") > 1  # streamed as the model produced it
    starts = [f["messageId"] for f in wire if f["type"] == "TEXT_MESSAGE_START"]
    assert len(starts) == 2 and starts[0] != starts[1]  # text after a tool call: a new id
    result_at = kinds.index("TOOL_CALL_RESULT")
    assert kinds.index("TEXT_MESSAGE_START", result_at) > result_at
    session = session_of(app, "t1")
    assert decode(wire) == list(session.log.view())


async def test_plan_is_an_activity_and_state_changes_stream_as_json_patch() -> None:
    async with asgi_client(create_app(LocalPort(agent_for()))) as client:
        _, plan = await post(client, run_input("t1", "r1", [user("u1", "make a plan")]))
        _, state = await post(client, run_input("t2", "r1", [user("u1", "state")], state={"n": 1}))
    activity = [f for f in plan if f["type"] == "ACTIVITY_SNAPSHOT"]
    assert activity and activity[0]["activityType"] == "plan"
    assert len(activity[0]["content"]["entries"]) == 3
    snapshot = next(f for f in state if f["type"] == "STATE_SNAPSHOT")
    delta = next(f for f in state if f["type"] == "STATE_DELTA")
    assert snapshot["snapshot"] == {"n": 1}
    assert delta["delta"] == [{"op": "add", "path": "/demo", "value": "changed"}]
    assert types(state).index("STATE_SNAPSHOT") < types(state).index("STATE_DELTA")


async def test_threads_keep_history_and_resent_messages_are_not_duplicated() -> None:
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hello")]))
        history = next(f for f in first if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        body = run_input("t1", "r2", [*history, user("u2", "again")])
        _, second = await post(client, body)
    log = list(session_of(app, "t1").log.view())
    assert [e.message_id for e in log if isinstance(e, ev.UserMessage)] == ["u1", "u2"]
    request = [e for e in log if isinstance(e, ev.ModelRequestEvent)][-1].request
    assert [m.id for m in request.messages if m.role == "user"] == ["u1", "u2"]
    # the client sent the whole thread back: with the run's stream it holds it all, so the
    # thread is not sent to it again
    assert "MESSAGES_SNAPSHOT" not in types(second)


async def test_a_client_that_lacks_messages_of_the_thread_gets_the_whole_thread() -> None:
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hello")]))
        history = next(f for f in first if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        _, second = await post(client, run_input("t1", "r2", [user("u2", "again")]))
        _, third = await post(client, run_input("t1", "r3", [*history[:1], user("u3", "more")]))
    for wire in (second, third):
        snapshot = next(f for f in wire if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        assert [m["id"] for m in snapshot[: len(history)]] == [m["id"] for m in history]
        assert [m["id"] for m in snapshot if m["role"] == "user"][-1] in ("u2", "u3")
    users = [m["id"] for m in snapshot if m["role"] == "user"]
    assert users == ["u1", "u2", "u3"]


async def test_snapshot_false_in_forwarded_props_leaves_the_snapshot_out() -> None:
    app = create_app(LocalPort(agent_for()))
    no_snapshot = {"steerable": {"snapshot": False}}
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hello")]))
        _, skipped = await post(
            client, run_input("t1", "r2", [user("u2", "again")], forwardedProps=no_snapshot)
        )
        _, fresh = await post(
            client, run_input("t2", "r1", [user("v1", "hi")], forwardedProps=no_snapshot)
        )
        _, default = await post(client, run_input("t1", "r3", [user("u3", "more")]))
        bad = await client.post(
            "/agent",
            json=run_input(
                "t1", "r4", [user("u4", "x")], forwardedProps={"steerable": {"snapshot": "no"}}
            ),
        )
    # by default a client that did not send the thread back gets it; with false it does not,
    # not even on a new thread, and the run itself streams as always
    assert "MESSAGES_SNAPSHOT" in types(first)
    for wire in (skipped, fresh):
        assert "MESSAGES_SNAPSHOT" not in types(wire)
        assert types(wire)[0] == "RUN_STARTED" and types(wire)[-1] == "RUN_FINISHED"
        assert "TEXT_MESSAGE_CONTENT" in types(wire)
    # the run without a snapshot is in the thread: the next one's snapshot holds it, once
    snapshot = next(f for f in default if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [m["id"] for m in snapshot if m["role"] == "user"] == ["u1", "u2", "u3"]
    assert len({m["id"] for m in snapshot}) == len(snapshot)
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "invalid_input"
    assert "forwardedProps.steerable.snapshot" in error["message"]
    assert "true or false" in error["message"]
    log = list(session_of(app, "t1").log.view())
    assert [e.message_id for e in log if isinstance(e, ev.UserMessage)] == ["u1", "u2", "u3"]


async def test_several_new_user_messages_are_all_logged_and_streamed_in_seq_order() -> None:
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        body = run_input("t1", "r1", [user("u1", "first"), user("u2", "second")])
        _, wire = await post(client, body)
    log = list(session_of(app, "t1").log.view())
    assert [e.message_id for e in log if isinstance(e, ev.UserMessage)] == ["u1", "u2"]
    assert types(wire)[:2] == ["RUN_STARTED", "CUSTOM"]
    assert sorted(decode(wire), key=lambda e: e.seq) == log


FRONTEND_TOOL = {
    "name": "show_card",
    "description": "Show a card in the web page.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
}


async def test_frontend_tool_round_trip() -> None:
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        body = run_input("t1", "r1", [user("u1", "please show_card")], tools=[FRONTEND_TOOL])
        _, first = await post(client, body)
        finished = first[-1]
        assert finished["type"] == "RUN_FINISHED"
        (call_id,) = finished["outcome"]["pendingToolCallIds"]
        assert finished["outcome"]["type"] == "success"
        start = next(f for f in first if f["type"] == "TOOL_CALL_START")
        assert start["toolCallName"] == "show_card" and start["toolCallId"] == call_id
        assert "TOOL_CALL_RESULT" not in types(first)
        history = next(f for f in first if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        answer = {"id": "tm1", "role": "tool", "toolCallId": call_id, "content": "card shown"}
        _, second = await post(
            client, run_input("t1", "r2", [*history, answer], tools=[FRONTEND_TOOL])
        )
    result = next(f for f in second if f["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call_id and result["content"] == "card shown"
    text = "".join(f["delta"] for f in second if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert "card shown" in text
    assert second[-1]["outcome"] == {"type": "success"}


async def test_a_0_0_x_client_finds_pending_frontend_calls_in_the_stream() -> None:
    """No protocolVersion (CopilotKit's @ag-ui/client 0.0.59): a strict `success` outcome."""
    app = create_app(LocalPort(agent_for()))
    async with asgi_client(app) as client:
        body = run_input(
            "t1",
            "r1",
            [user("u1", "please show_card")],
            tools=[FRONTEND_TOOL],
            protocolVersion=None,
        )
        _, first = await post(client, body)
    assert first[-1]["type"] == "RUN_FINISHED" and first[-1]["outcome"] == {"type": "success"}
    started = {f["toolCallId"] for f in first if f["type"] == "TOOL_CALL_START"}
    answered = {f["toolCallId"] for f in first if f["type"] == "TOOL_CALL_RESULT"}
    assert len(started - answered) == 1


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_interrupts_the_run_and_resume_continues_it(approved: bool) -> None:
    WRITTEN.clear()
    app = create_app(LocalPort(agent_for(approval="ask")))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "write a note")]))
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        assert interrupt["id"] == f"approval-{interrupt['toolCallId']}"
        assert interrupt["responseSchema"]["required"] == ["approved"]
        assert WRITTEN == {}
        history = next(f for f in first if f["type"] == "MESSAGES_SNAPSHOT")["messages"]
        resume = [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"approved": approved},
            }
        ]
        _, second = await post(client, run_input("t1", "r2", history, resume=resume))
    result = next(f for f in second if f["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["toolCallId"]
    status = result["metadata"]["steerable"]["status"]
    assert status == ("completed" if approved else "failed")
    assert (WRITTEN != {}) is approved
    assert second[-1]["type"] == "RUN_FINISHED" and second[-1]["outcome"]["type"] == "success"


async def test_model_errors_end_with_one_run_error() -> None:
    async with asgi_client(create_app(LocalPort(agent_for()))) as client:
        _, wire = await post(client, run_input("t1", "r1", [user("u1", "show an error")]))
    assert types(wire).count("RUN_ERROR") == 1 and wire[-1]["type"] == "RUN_ERROR"
    assert wire[-1]["code"] == "demo_error" and "RUN_FINISHED" not in types(wire)


async def test_bearer_token() -> None:
    body = run_input("t1", "r1", [user("u1", "hi")])
    async with asgi_client(create_app(LocalPort(agent_for()), token="s3cret")) as client:
        missing, _ = await post(client, body)
        wrong, _ = await post(client, body, headers={"Authorization": "Bearer nope"})
        right, wire = await post(client, body, headers={"Authorization": "Bearer s3cret"})
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.json()["error"]["code"] == "unauthorized"
    assert missing.headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200 and wire[-1]["type"] == "RUN_FINISHED"


async def test_health_without_the_token_says_only_ok() -> None:
    async with asgi_client(create_app(LocalPort(agent_for()), token="s3cret")) as client:
        anonymous = await client.get("/health")
        wrong = await client.get("/health", headers={"Authorization": "Bearer nope"})
        right = await client.get("/health", headers={"Authorization": "Bearer s3cret"})
    for bare in (anonymous, wrong):
        assert bare.status_code == 200 and bare.text == "ok"
        assert bare.headers["content-type"].startswith("text/plain")
    assert right.json()["status"] == "ok" and "write_file" in right.json()["tools"]


async def test_body_limit_checks_declared_and_actual_size() -> None:
    big = run_input("t1", "r1", [user("u1", "x" * 2000)])
    async with asgi_client(create_app(LocalPort(agent_for()), max_body=1000)) as client:
        declared, _ = await post(client, big)

        async def chunks() -> Any:
            yield b'{"threadId":"t1","runId":"r1","messages":[],"pad":"'
            yield b"y" * 2000
            yield b'"}'

        streamed = await client.post("/agent", content=chunks(), headers=JSON_TYPE)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "body_too_large"
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413


async def test_invalid_input_is_422_with_the_errors() -> None:
    async with asgi_client(create_app(LocalPort(agent_for()))) as client:
        not_json = await client.post("/agent", content=b"{nope", headers=JSON_TYPE)
        missing, _ = await post(client, {"threadId": "t1", "messages": []})
        bad_resume, _ = await post(
            client,
            run_input("t1", "r1", [], resume=[{"interruptId": "approval-x", "status": "resolved"}]),
        )
    assert not_json.status_code == 422 and not_json.json()["error"]["code"] == "invalid_json"
    assert missing.status_code == 422
    details = missing.json()["error"]["details"]
    assert any(d["loc"] == ["runId"] for d in details)
    assert bad_resume.status_code == 422
    assert bad_resume.json()["error"]["code"] == "unknown_interrupt"


async def test_cors_only_for_the_given_origins() -> None:
    app = create_app(LocalPort(agent_for()), cors_origins=("https://app.example",))
    async with asgi_client(app) as client:
        ok = await client.get("/health", headers={"Origin": "https://app.example"})
        other = await client.get("/health", headers={"Origin": "https://evil.example"})
        preflight = await client.options(
            "/agent",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
    async with asgi_client(create_app(LocalPort(agent_for()))) as client:
        closed = await client.get("/health", headers={"Origin": "https://app.example"})
    assert ok.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers
    assert preflight.status_code == 200
    assert "access-control-allow-origin" not in closed.headers


class Held:
    """The scripted model, whose first call holds its response until `release` is set: the
    turn stays running for as long as a test needs, and ends as soon as it is let go."""

    def __init__(self, scripted: ScriptedProvider) -> None:
        self.scripted = scripted
        self.release = anyio.Event()
        self.calls = 0

    @property
    def info(self) -> ModelInfo:
        return self.scripted.info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        held = self.calls == 1
        async for item in self.scripted.stream(request):
            if held and isinstance(item, ModelResponse):
                with anyio.fail_after(10):
                    await self.release.wait()
            yield item


async def test_a_busy_thread_answers_409_unless_the_request_steers() -> None:
    # the first turn's model call is held until both other requests were answered
    slow = Held(scripted({"text": "abcdefghij", "chunk_size": 1}, loop=True))
    app = create_app(LocalPort(agent_for(slow)))
    results: dict[str, Any] = {}
    async with asgi_client(app) as client:

        async def first() -> None:
            results["first"] = await post(client, run_input("t1", "r1", [user("u1", "go")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await until(lambda: (s := session_of(app, "t1")) is not None and s.running)
            busy, _ = await post(
                client, run_input("t1", "r2", [user("u1", "go"), user("u2", "more")])
            )
            steer_props = {"steerable": {"steer": True}}
            steer, short = await post(
                client,
                run_input(
                    "t1",
                    "r3",
                    [user("u1", "go"), user("u3", "also this")],
                    forwardedProps=steer_props,
                ),
            )
            slow.release.set()
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "thread_busy"
    assert steer.status_code == 200
    assert types(short) == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    assert short[1]["name"] == "steerable.steer_absorbed"
    assert short[1]["value"]["messageIds"] == ["u3"]
    _, wire = results["first"]
    assert wire[-1]["type"] == "RUN_FINISHED"
    steered = [e for e in decode(wire) if isinstance(e, ev.SteerApplied)]
    assert [p.text for p in steered[0].content] == ["also this"]  # type: ignore[union-attr]
    assert isinstance(httpx, object)


async def test_a_follow_up_request_is_taken_when_the_running_turn_would_end() -> None:
    # the first turn's model call is held until the follow-up was queued
    slow = Held(scripted({"text": "abcdefghijklmnopqrst", "chunk_size": 1}, {"text": "and then"}))
    app = create_app(LocalPort(agent_for(slow)))
    results: dict[str, Any] = {}
    async with asgi_client(app) as client:

        async def first() -> None:
            results["first"] = await post(client, run_input("t1", "r1", [user("u1", "go")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await until(lambda: (s := session_of(app, "t1")) is not None and s.running)
            queued, short = await post(
                client,
                run_input(
                    "t1",
                    "r2",
                    [user("u1", "go"), user("u2", "after that, this")],
                    forwardedProps={"steerable": {"follow_up": True}},
                ),
            )
            slow.release.set()
    assert queued.status_code == 200
    assert short[1]["name"] == "steerable.follow_up_queued"
    assert short[1]["value"]["messageIds"] == ["u2"]
    _, wire = results["first"]
    assert wire[-1]["type"] == "RUN_FINISHED"
    applied = [e for e in decode(wire) if isinstance(e, ev.FollowUpApplied)]
    assert [p.text for p in applied[0].content] == ["after that, this"]  # type: ignore[union-attr]
    text = "".join(f["delta"] for f in wire if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.endswith("and then")


async def test_forwarded_command_compact_compacts_the_thread() -> None:
    provider = scripted(
        {"text": "long answer " * 40},
        {"text": "after"},
        summary_rounds=[{"text": "SUMMARY of the thread", "chunk_size": 8}],
    )
    app = create_app(LocalPort(agent_for(provider)))
    compact = {"steerable": {"command": "compact"}}
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "hello")]))
        _, wire = await post(client, run_input("t1", "r2", [], forwardedProps=compact))
        _, after = await post(client, run_input("t1", "r3", [user("u2", "and now?")]))
        bad = await client.post(
            "/agent",
            json=run_input("t1", "r4", [], forwardedProps={"steerable": {"command": "nope"}}),
        )
    assert types(wire)[0] == "RUN_STARTED" and types(wire)[-1] == "RUN_FINISHED"
    events = decode(wire)
    folds = [e for e in events if isinstance(e, ev.Compaction)]
    assert len(folds) == 1 and folds[0].trigger == "manual"
    assert folds[0].summary == "SUMMARY of the thread"
    # the summary streamed as the model wrote it: CUSTOM pieces before the compaction
    names = [f["name"] for f in wire if f["type"] == "CUSTOM" and "compaction" in f["name"]]
    assert names == [
        "steerable.compaction_started",
        *["steerable.compaction_summary_delta"] * 3,
        "steerable.compaction",
    ]
    pieces = [e for e in events if isinstance(e, ev.CompactionSummaryDelta)]
    assert "".join(p.delta for p in pieces) == folds[0].summary
    assert {p.compaction_id for p in pieces} == {folds[0].compaction_id}
    assert not any(isinstance(e, ev.ModelRequestEvent) for e in events)
    thread = decode([*first, *wire, *after])  # its request refers to the first run's
    request = [e for e in thread if isinstance(e, ev.ModelRequestEvent)][-1].request
    assert request.messages[0].text.endswith("SUMMARY of the thread")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_command"


async def test_idle_threads_are_forgotten_and_continue_from_the_store() -> None:
    from steerable_bridge.adapters.llm.demo import DemoProvider
    from tests.runtime.harness import make_agent

    agent = make_agent(DemoProvider(pace_ms=0), max_sessions=3)
    app = create_app(LocalPort(agent), max_threads=agent.config.max_sessions)
    async with asgi_client(app) as client:
        for n in range(6):
            await post(client, run_input(f"t{n}", "r1", [user(f"u{n}", f"hello {n}")]))
        assert len(app.state.threads) <= 3 and agent.sessions_in_memory <= 3
        _, wire = await post(client, run_input("t0", "r2", [user("u9", "back")]))
    assert types(wire)[-1] == "RUN_FINISHED"
    snapshot = [f for f in wire if f["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
    contents = [m.get("content") for m in snapshot if m["role"] == "user"]
    assert contents == ["hello 0", "back"]  # the forgotten thread kept its history


async def test_forwarded_mode_and_model_switch_the_thread_and_unknown_ones_are_422() -> None:
    write = {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "m.txt",
             "content": "x"}}]}  # fmt: skip
    provider = scripted(write, {"text": "left it alone"}, write, {"text": "unused"})
    app = create_app(LocalPort(agent_for(provider)))

    def props(**own: Any) -> dict[str, Any]:
        return {"forwardedProps": {"steerable": own}}

    async with asgi_client(app) as client:
        bad_mode = await client.post("/agent", json=run_input("t1", "r0", [], **props(mode="yolo")))
        bad_option = await client.post(
            "/agent", json=run_input("t1", "r1", [], **props(config={"model": "nope:x"}))
        )
        bad_shape = await client.post("/agent", json=run_input("t1", "r2", [], **props(mode=3)))
        _, read_only = await post(
            client, run_input("t1", "r3", [user("u1", "write m.txt")], **props(mode="read-only"))
        )
        _, asked = await post(
            client, run_input("t1", "r4", [user("u2", "again")], **props(mode="default"))
        )
    assert bad_mode.status_code == 422 and bad_mode.json()["error"]["code"] == "unknown_mode"
    assert "read-only" in bad_mode.json()["error"]["message"]
    assert bad_option.status_code == 422 and bad_option.json()["error"]["code"] == "unknown_option"
    assert "nope:x" in bad_option.json()["error"]["message"]
    assert bad_shape.status_code == 422 and bad_shape.json()["error"]["code"] == "invalid_settings"
    events = decode(read_only)
    assert [e.mode_id for e in events if isinstance(e, ev.ModeChanged)] == ["read-only"]
    assert read_only[-1]["outcome"] == {"type": "success"}  # refused by the mode, nobody asked
    assert "m.txt" not in WRITTEN
    assert asked[-1]["outcome"]["type"] == "interrupt"  # back in default: the person decides


async def test_threads_are_listed_newest_first_and_a_bad_cursor_is_refused() -> None:
    app = create_app(LocalPort(agent_for(scripted({"text": "ok"}, loop=True))))
    async with asgi_client(app) as client:
        await post(client, run_input("t1", "r1", [user("u1", "first thread")]))
        await post(client, run_input("t2", "r2", [user("u2", "second thread")]))
        listed = (await client.get("/agent/threads")).json()
        bad = await client.get("/agent/threads", params={"cursor": "nonsense"})
    assert [t["threadId"] for t in listed["threads"]] == ["t2", "t1"]
    assert listed["threads"][0]["title"] == "second thread" and listed["nextCursor"] is None
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_cursor"


async def test_the_lifespan_runs_the_hosts_services_and_cancels_them_when_it_ends() -> None:
    states: list[str] = []

    async def service(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        states.append("started")
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            states.append("cancelled")

    app = create_app(LocalPort(agent_for()), services=(service,))
    with anyio.fail_after(10):
        async with app.router.lifespan_context(app):
            assert states == ["started"]
    assert states == ["started", "cancelled"]
