"""`steerable-bridge acp` on a shared store: a cancel sent by another process (another
server, or `Agent.cancel` here) reaches the turn the agent runs, through the store's
signals — for SQLite and for a real PostgreSQL."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp
from acp import spawn_agent_process

from steerable_bridge.commands.storage_choice import build_store
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


class _Client:
    def __init__(self) -> None:
        self.streaming = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentMessageChunk):
            self.streaming.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return str(request.getfixturevalue("pg_url"))


async def test_a_cancel_from_another_process_stops_the_acp_turn(
    storage: str, tmp_path: Path
) -> None:
    script = tmp_path / "hang.json"
    script.write_text(json.dumps({"rounds": [{"text": "working", "hang": True}], "loop": True}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    client = _Client()
    other = Agent(router=ModelRouter(), store=build_store(storage), config=AgentConfig())
    command = ["-m", "steerable_bridge.cli", "acp", "--storage", storage]
    try:
        async with spawn_agent_process(
            client,
            sys.executable,
            *command,
            "--model",
            f"scripted:{script}",
            env=env,
            cwd=tmp_path,
        ) as (conn, _process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer: list[str] = []

            async def prompt() -> None:
                block = acp.TextContentBlock(type="text", text="go")
                reply = await conn.prompt(session_id=session.session_id, prompt=[block])
                answer.append(reply.stop_reason)

            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt)
                with anyio.fail_after(30):
                    await client.streaming.wait()
                    assert await other.owner_elsewhere(session.session_id) is not None
                    assert await other.cancel(session.session_id, "stopped elsewhere") is True
    finally:
        await other.aclose()
    assert answer == ["cancelled"]
