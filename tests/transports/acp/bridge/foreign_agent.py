"""An ACP agent that is not ours, for the bridge's tests: run as `python foreign_agent.py`.

It behaves like third-party agents do: no `_meta.steerable` anywhere, no session/resume
(session/load only with `FOREIGN_LOAD=1`, replaying an old answer, plan and commands), a
command list sent right after `session/new` (before any prompt), and mid-turn it calls a
vendor extension and reads a file outside the workspace, then asks permission for a tool
and reports in its answer what each request got back (and what it heard). Written with the
ACP SDK's agent side; everything it says is plain ACP.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp import schema as s


class Foreign:
    def __init__(self) -> None:
        self.conn: Any = None
        self.count = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> s.InitializeResponse:
        loads = os.environ.get("FOREIGN_LOAD") == "1"
        return s.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=s.AgentCapabilities(load_session=loads),
        )

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> None:
        """Any session loads (this agent keeps nothing): it replays an old answer, an old
        plan and its commands, as agents replay a stored session."""
        await self.say(session_id, "an old answer")
        await self.conn.session_update(
            session_id,
            s.AgentPlanUpdate(
                session_update="plan",
                entries=[s.PlanEntry(content="old step", priority="low", status="completed")],
            ),
        )
        await self.conn.session_update(
            session_id,
            s.AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=[s.AvailableCommand(name="resumed", description="again")],
            ),
        )
        return None

    async def new_session(self, cwd: str, **kwargs: Any) -> s.NewSessionResponse:
        self.count += 1
        session_id = f"foreign-{self.count}"

        async def announce() -> None:
            await asyncio.sleep(0)
            await self.conn.session_update(
                session_id,
                s.AvailableCommandsUpdate(
                    session_update="available_commands_update",
                    available_commands=[s.AvailableCommand(name="review", description="review")],
                ),
            )

        asyncio.get_running_loop().create_task(announce())
        return s.NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        notes: list[str] = []
        said = " / ".join(b.text for b in prompt if isinstance(b, s.TextContentBlock))
        await self.say(session_id, f"heard: {said}\n")
        try:
            await self.conn.ext_method("vendor/ping", {})
            notes.append("vendor: answered")
        except RequestError as error:
            notes.append(f"vendor: error {error.code}")
        try:
            await self.conn.read_text_file(session_id=session_id, path="/etc/hostname")
            notes.append("fs: read")
        except RequestError as error:
            notes.append(f"fs: error {error.code} {(error.data or {}).get('code')}")
        await self.say(session_id, " | ".join(notes) + "\n")
        await self.conn.session_update(
            session_id,
            s.ToolCallStart(
                session_update="tool_call", tool_call_id="x1", title="Delete cache", kind="delete",
                status="pending", raw_input={"path": "cache"},
            ),
        )  # fmt: skip
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=s.ToolCallUpdate(tool_call_id="x1"),
            options=[
                s.PermissionOption(option_id="yes", name="Yes", kind="allow_once"),
                s.PermissionOption(option_id="no", name="No", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        chosen = getattr(outcome, "option_id", None) or outcome.outcome
        status = "completed" if chosen == "yes" else "failed"
        await self.conn.session_update(
            session_id,
            s.ToolCallProgress(
                session_update="tool_call_update", tool_call_id="x1", status=status,
                content=[s.ContentToolCallContent(
                    type="content", content=s.TextContentBlock(type="text", text=chosen)
                )],
            ),
        )  # fmt: skip
        await self.say(session_id, f"permission: {chosen}")
        return s.PromptResponse(
            stop_reason="end_turn",
            usage=s.Usage(total_tokens=9, input_tokens=7, output_tokens=2),
        )

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(
            session_id,
            s.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=s.TextContentBlock(type="text", text=text),
            ),
        )

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(Foreign()))  # type: ignore[arg-type]
