"""`check agui`: our own server passes; deliberately broken servers fail with the rule ids."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from steerable_bridge.conformance.validators.check_agui import (
    CouldNotRun,
    check_agui_endpoint,
    default_run_input,
)
from tests.prompt_server import PromptServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@asynccontextmanager
async def live(app: Starlette) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1, a free port; yields the base URL; stops it."""
    server = PromptServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


def our_app(token: str | None = None) -> Starlette:
    from steerable_bridge.adapters.tools.builtin import builtin_tools
    from steerable_bridge.commands.common import build_agent
    from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
    from steerable_bridge.transports.agui.app import create_app

    options = argparse.Namespace(
        model="demo:default", storage="memory", approve="all", max_steps=25
    )
    return create_app(
        LocalPort(build_agent(options, tools=builtin_tools(shared_state=True))), token=token
    )


def broken_app() -> Starlette:
    """An AG-UI server with the bugs users meet in the wild."""
    encoder = EventEncoder()

    async def run(request: Request) -> StreamingResponse:
        body = await request.json()
        thread, run_id = body["threadId"], body["runId"]

        async def stream() -> AsyncIterator[bytes]:
            for event in (
                RunStartedEvent(thread_id=thread, run_id=run_id),
                TextMessageContentEvent(message_id="m1", delta="no START before me"),
                ToolCallStartEvent(tool_call_id="t1", tool_call_name="search"),
                ToolCallEndEvent(tool_call_id="t1"),
                ToolCallResultEvent(message_id="r1", tool_call_id="t1", content="one"),
                ToolCallResultEvent(message_id="r1", tool_call_id="t9", content="two"),
            ):
                yield encoder.encode(event).encode()
            yield b"data: this is not json\n\n"
            yield encoder.encode(RunErrorEvent(message="boom")).encode()
            yield encoder.encode(RunFinishedEvent(thread_id=thread, run_id=run_id)).encode()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def hang(request: Request) -> StreamingResponse:
        body = await request.json()

        async def stream() -> AsyncIterator[bytes]:
            started = RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"])
            yield encoder.encode(started).encode()
            await anyio.sleep(30)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def plain(request: Request) -> Response:
        return Response(json.dumps({"type": "RUN_STARTED"}), media_type="application/json")

    return Starlette(
        routes=[
            Route("/agent", run, methods=["POST"]),
            Route("/json", plain, methods=["POST"]),
            Route("/hang", hang, methods=["POST"]),
        ]
    )


def statuses(report: Any) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


async def test_our_own_server_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    record = tmp_path / "stream.sse"
    async with live(our_app()) as base:
        report = await check_agui_endpoint(f"{base}/agent", record=record, within=20)
    assert report.failed == (), report.to_text()
    assert statuses(report) == {
        "agui.http.content_type": "pass",
        "agui.sse.json": "pass",
        "agui.stream.complete": "pass",
        "agui.rules": "pass",
    }
    raw = record.read_bytes()
    assert raw.startswith(b"id: 0\ndata: ") and b'"RUN_FINISHED"' in raw


async def test_a_broken_server_fails_with_the_expected_rule_ids() -> None:
    async with live(broken_app()) as base:
        report = await check_agui_endpoint(f"{base}/agent", within=10)
        plain = await check_agui_endpoint(f"{base}/json", within=10)
        hung = await check_agui_endpoint(f"{base}/hang", within=0.5)
    got = statuses(report)
    assert {c.id for c in report.failed} == {
        "agui.sse.json",
        "agui.text-not-open",
        "agui.result-unknown-call",
        "agui.result-id-reused",
        "agui.one-terminal",
    }, report.to_text()
    assert got["agui.http.content_type"] == "pass"
    assert "RUN_FINISHED after RUN_ERROR" in next(
        c.evidence for c in report.checks if c.id == "agui.one-terminal"
    )
    assert "this is not json" in next(c.evidence for c in report.checks if c.id == "agui.sse.json")
    assert report.exit_code() == 1
    assert statuses(plain)["agui.http.content_type"] == "fail"
    assert statuses(hung)["agui.stream.complete"] == "fail"
    assert "did not end within 0.5 s (1 events so far)" in next(
        c.evidence for c in hung.checks if c.id == "agui.stream.complete"
    )
    assert statuses(hung)["agui.one-terminal"] == "fail"  # the rules see the cut stream


async def test_unreachable_or_locked_endpoints_could_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    async with live(our_app(token="sekrit")) as base:
        with pytest.raises(CouldNotRun, match="pass --token"):
            await check_agui_endpoint(f"{base}/agent", within=10)
        with pytest.raises(CouldNotRun, match="HTTP 404"):
            await check_agui_endpoint(f"{base}/nowhere", token="sekrit", within=10)
        report = await check_agui_endpoint(f"{base}/agent", token="sekrit", within=10)
        assert report.ok, report.to_text()
    with pytest.raises(CouldNotRun, match="cannot reach"):
        await check_agui_endpoint(base + "/agent", within=5)


async def test_the_cli_posts_the_given_input_and_keeps_the_stream(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEERABLE_DEMO_PACE_MS", "0")
    given = default_run_input()
    given["threadId"] = "thread-from-file"
    (tmp_path / "input.json").write_text(json.dumps(given))
    results: dict[str, Any] = {}

    async def cli(name: str, *args: str) -> None:
        command = [sys.executable, "-m", "steerable_bridge.cli", "check", "agui", *args]
        results[name] = await anyio.run_process(command, check=False)

    # Three CLIs at once: each is a cold start.
    async with (
        live(our_app()) as base,
        live(broken_app()) as broken,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(
            cli,
            "good",
            f"{base}/agent",
            "--input",
            str(tmp_path / "input.json"),
            "--record",
            str(tmp_path / "raw.sse"),
            "--report",
            str(tmp_path / "r.json"),
        )
        tg.start_soon(cli, "bad", f"{broken}/agent")
        tg.start_soon(cli, "gone", "http://127.0.0.1:1/agent")
    good, bad, gone = results["good"], results["bad"], results["gone"]
    assert good.returncode == 0, good.stdout.decode() + good.stderr.decode()
    assert b'"threadId":"thread-from-file"' in (tmp_path / "raw.sse").read_bytes()
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["fail"] == 0
    assert bad.returncode == 1
    assert b"FAIL    agui.text-not-open" in bad.stdout
    assert gone.returncode == 2
    assert b"could not run" in gone.stderr
