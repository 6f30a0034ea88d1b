"""What the chat page asks of `POST /agent` beyond a plain run: an approval answered "always"
(`resume[].payload.always`), kept for the thread's later calls of that tool, and a model
picked for the run (`forwardedProps.steerable.model`)."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.transports.agui.harness import (
    WRITTEN,
    agent_for,
    asgi_client,
    post,
    run_input,
    session_of,
    user,
)

pytestmark = pytest.mark.anyio


def _answer(first: list[dict[str, Any]], **payload: bool) -> list[dict[str, Any]]:
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


def _history(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return next(f for f in reversed(frames) if f["type"] == "MESSAGES_SNAPSHOT")["messages"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("approved", [True, False])
async def test_an_always_answer_is_kept_for_the_next_call_of_that_tool(approved: bool) -> None:
    WRITTEN.clear()
    app = create_app(LocalPort(agent_for(approval="ask")))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "write a note")]))
        resume = _answer(first, approved=approved, always=True)
        _, second = await post(client, run_input("t1", "r2", _history(first), resume=resume))
        WRITTEN.clear()
        again = [*_history(second), user("u2", "write another note")]
        _, third = await post(client, run_input("t1", "r3", again))
        session = session_of(app, "t1")
    assert third[-1]["outcome"]["type"] == "success"  # not asked again
    (result,) = [f for f in third if f["type"] == "TOOL_CALL_RESULT"]
    assert result["metadata"]["steerable"]["status"] == ("completed" if approved else "failed")
    assert (WRITTEN != {}) is approved
    assert session is not None
    resolved = [e for e in session.log.view() if isinstance(e, ev.PermissionResolved)]
    assert [e.outcome for e in resolved] == ["allow_always" if approved else "reject_always"]
    assert resolved[0].approval_key == "write_file"


async def test_a_once_answer_asks_again_and_always_must_be_a_boolean() -> None:
    app = create_app(LocalPort(agent_for(approval="ask")))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "write a note")]))
        wrong = _answer(first, approved=True)
        wrong[0]["payload"]["always"] = "yes"
        refused, _ = await post(client, run_input("t1", "r2", _history(first), resume=wrong))
        once = _answer(first, approved=True)
        _, second = await post(client, run_input("t1", "r3", _history(first), resume=once))
        again = [*_history(second), user("u2", "write another note")]
        _, third = await post(client, run_input("t1", "r4", again))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_resume"
    assert second[-1]["outcome"]["type"] == "success"
    assert third[-1]["outcome"]["type"] == "interrupt"  # once: asked again


def _model_input(run: str, text: str, model: Any) -> dict[str, Any]:
    return run_input("t1", run, [user(run, text)], forwardedProps={"steerable": {"model": model}})


async def test_a_run_may_pick_one_of_the_model_routes() -> None:
    agent = agent_for()
    for route in ("test:m", "test:other"):
        agent.router.offer(route)  # what serve's model list does
    app = create_app(LocalPort(agent))
    async with asgi_client(app) as client:
        caps = (await client.get("/agent/capabilities")).json()["custom"]["steerable"]
        _, picked = await post(client, _model_input("r1", "hi", "test:other"))
        unknown, _ = await post(client, _model_input("r2", "hi again", "nowhere:x"))
        empty, _ = await post(client, _model_input("r3", "hi again", ""))
    requests = [
        f["value"]["request"]["model"]
        for f in picked
        if f["type"] == "CUSTOM" and f["name"] == "steerable.model_request"
    ]
    assert caps["models"] == ["test:m", "test:other"]  # the page offers a picker then
    assert requests == ["test:other"]
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_model"
    assert "custom.steerable.models" in unknown.json()["error"]["message"]
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_model"


async def test_a_waiting_approval_in_the_snapshot_offers_the_options_the_stream_did() -> None:
    """The page opens a thread from GET /agent/threads/{id}: an approval waiting there must
    come with the same choices CUSTOM `steerable.permission_requested` offered live."""
    app = create_app(LocalPort(agent_for(approval="ask")))
    async with asgi_client(app) as client:
        _, first = await post(client, run_input("t1", "r1", [user("u1", "write a note")]))
        snap = (await client.get("/agent/threads/t1")).json()
        _, second = await post(
            client, run_input("t1", "r2", _history(first), resume=_answer(first, approved=True))
        )
        after = (await client.get("/agent/threads/t1")).json()
    (live,) = first[-1]["outcome"]["interrupts"]
    requested = next(f for f in first if f.get("name") == "steerable.permission_requested")
    (waiting,) = snap["interrupts"]
    assert {k: v for k, v in waiting.items() if k != "metadata"} == live
    assert waiting["metadata"] == {"steerable": {"options": requested["value"]["options"]}}
    assert [o["kind"] for o in waiting["metadata"]["steerable"]["options"]][:2] == [
        "allow_once",
        "allow_always",
    ]
    assert second[-1]["outcome"]["type"] == "success" and after["interrupts"] == []
