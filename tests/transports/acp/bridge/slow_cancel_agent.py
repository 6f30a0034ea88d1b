"""An ACP agent that takes its time to stop: run as `python slow_cancel_agent.py SECONDS`.

A prompt streams `tick N` chunks (one every 50 ms, for at most a minute) until
`session/cancel`; the prompt then ends `cancelled` only SECONDS later, as a real agent
busy with its model call or a tool does (codex-acp under load took over a second). Written
with the ACP SDK's agent side.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp import schema as s

TICKS = 1200


class SlowToCancel:
    def __init__(self, delay_s: float) -> None:
        self.conn: Any = None
        self.delay_s = delay_s
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> s.InitializeResponse:
        return s.InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> s.NewSessionResponse:
        return s.NewSessionResponse(session_id=f"slow-{uuid.uuid4().hex[:8]}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        cancelled = self.cancelled[session_id] = asyncio.Event()
        said = " ".join(b.text for b in prompt if isinstance(b, s.TextContentBlock))
        for tick in range(TICKS if said == "long" else 1):
            if cancelled.is_set():
                await asyncio.sleep(self.delay_s)  # finishing what it was doing
                return s.PromptResponse(stop_reason="cancelled")
            await self.conn.session_update(
                session_id,
                s.AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=s.TextContentBlock(type="text", text=f"tick {tick} "),
                ),
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancelled.wait(), 0.05)
        return s.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self.cancelled.get(session_id)
        if event is not None:
            event.set()


if __name__ == "__main__":
    asyncio.run(run_agent(SlowToCancel(float(sys.argv[1]))))  # type: ignore[arg-type]
