"""A steer that reaches a process other than the one running the turn is logged under the
client's message id, so when the client sends that message back in a later run — to either
process — it is not recorded a second time.

Two SQLite stores on one file stand for two server processes; process A runs the turn and
relays the signals process B publishes (`Agent.relay_signals`, as the app's lifespan does).
The turn waits in a tool until the test has steered, so the order is forced, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import asgi_client, post, run_input, types, until, user

pytestmark = pytest.mark.anyio


async def test_a_steer_through_another_process_is_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    store_a, store_b = SqliteStore(db), SqliteStore(db)
    in_tool, release = anyio.Event(), anyio.Event()

    async def wait(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        in_tool.set()
        with anyio.fail_after(10):
            await release.wait()
        return ToolResult(content=(TextPart(text="waited"),))

    waiting = Tool(name="wait", description="Waits for the test.", kind="think", handler=wait)
    model = scripted(
        {"tool_calls": [{"id": "c1", "name": "wait", "arguments": {}}]},
        {"text": "done"},
        loop=True,
    )
    agent_a = make_agent(model, tools=[waiting], store=store_a)  # type: ignore[arg-type]
    agent_b = make_agent(scripted({"text": "unused"}), store=store_b)  # type: ignore[arg-type]
    app_a, app_b = create_app(LocalPort(agent_a)), create_app(LocalPort(agent_b))
    async with asgi_client(app_a) as a, asgi_client(app_b) as b, anyio.create_task_group() as tg:
        await tg.start(agent_a.relay_signals)
        first: list[Any] = []

        async def run_on_a() -> None:
            first.append(await post(a, run_input("t1", "r1", [user("u1", "go")])))

        tg.start_soon(run_on_a)
        with anyio.fail_after(10):
            await in_tool.wait()
        steer = {"steerable": {"steer": True}}
        body = run_input("t1", "r2", [user("u1", "go"), user("u2", "also this")])
        response, wire = await post(b, {**body, "forwardedProps": steer})
        assert response.status_code == 200, response.text
        absorbed = [f for f in wire if f.get("name") == "steerable.steer_absorbed"]
        assert absorbed and absorbed[0]["value"]["messageIds"] == ["u2"]
        session_a = agent_a.get("t1")
        assert session_a is not None
        await until(lambda: len(session_a.steering), 10)  # the relay polls the store
        release.set()
        await until(lambda: first, 10)
        assert types(first[0][1])[-1] == "RUN_FINISHED"

        history = [user("u1", "go"), user("u2", "also this"), user("u3", "next")]
        for client, run_id in ((a, "r3"), (b, "r4")):  # the next runs land on either process
            response, wire = await post(client, run_input("t1", run_id, history))
            assert types(wire)[-1] == "RUN_FINISHED", wire
            history.append(user(f"u-{run_id}", "more"))
        tg.cancel_scope.cancel()
    logged = await store_a.read("t1")
    said = [e for e in logged if isinstance(e, ev.UserMessage | ev.SteerApplied)]
    texts = [part.text for e in said for part in e.content if isinstance(part, TextPart)]
    assert texts == ["go", "also this", "next", "more"]  # each message once, in order
    assert [(e.kind, e.message_id) for e in said[:3]] == [
        ("user_message", "u1"),
        ("steer_applied", "u2"),
        ("user_message", "u3"),
    ]
    await store_a.aclose()
    await store_b.aclose()


async def test_a_process_at_its_run_cap_still_passes_a_steer_on_to_the_owner(
    tmp_path: Path,
) -> None:
    """Process B runs nothing more (`max_runs=0`: every new run gets 503), but a steer for
    the turn process A runs is no new run: B hands it on, and a plain run still gets 503."""
    db = tmp_path / "sessions.db"
    store_a, store_b = SqliteStore(db), SqliteStore(db)
    in_tool, release = anyio.Event(), anyio.Event()

    async def wait(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        in_tool.set()
        with anyio.fail_after(10):
            await release.wait()
        return ToolResult(content=(TextPart(text="waited"),))

    waiting = Tool(name="wait", description="Waits for the test.", kind="think", handler=wait)
    call = {"id": "c1", "name": "wait", "arguments": {}}
    model = scripted({"tool_calls": [call]}, {"text": "ok"})
    agent_a = make_agent(model, tools=[waiting], store=store_a)  # type: ignore[arg-type]
    agent_b = make_agent(scripted({"text": "unused"}), store=store_b)  # type: ignore[arg-type]
    port_a, port_b = LocalPort(agent_a), LocalPort(agent_b)
    app_a, app_b = create_app(port_a), create_app(port_b, max_runs=0)
    async with asgi_client(app_a) as a, asgi_client(app_b) as b, anyio.create_task_group() as tg:
        await tg.start(port_a.relay_signals)
        first: list[Any] = []

        async def run_on_a() -> None:
            first.append(await post(a, run_input("t1", "r1", [user("u1", "go")])))

        tg.start_soon(run_on_a)
        with anyio.fail_after(10):
            await in_tool.wait()
        body = run_input("t1", "r2", [user("u1", "go"), user("u2", "also this")])
        steered, wire = await post(b, {**body, "forwardedProps": {"steerable": {"steer": True}}})
        plain = await b.post("/agent", json=run_input("t2", "r1", [user("u9", "hi")]))
        session_a = agent_a.get("t1")
        assert session_a is not None
        await until(lambda: len(session_a.steering), 10)  # the relay polls the store
        release.set()
        await until(lambda: first, 10)
        tg.cancel_scope.cancel()
    assert steered.status_code == 200, steered.text
    absorbed = [f for f in wire if f.get("name") == "steerable.steer_absorbed"]
    assert absorbed and absorbed[0]["value"]["messageIds"] == ["u2"]
    assert plain.status_code == 503 and plain.json()["error"]["code"] == "too_many_runs"
    steered_in = [e for e in await store_a.read("t1") if isinstance(e, ev.SteerApplied)]
    assert [e.message_id for e in steered_in] == ["u2"]
    await store_a.aclose()
    await store_b.aclose()
