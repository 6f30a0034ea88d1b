"""A correct ACP agent (SDK agent side) that does what real agents do and `check acp` must allow.

It sends session-level updates (`available_commands_update`, `session_info_update`,
`usage_update`) after its `session/new`, `session/prompt`, `session/load` and
`session/resume` responses, as claude-agent-acp and others do; it sends a session-level
update before the turn's first text, so a cancel probe that fires on any update would cancel
before the turn began; it honours `session/cancel`. Started with `--launcher`, it is a
launcher that leaves a long-lived child process in its process group (as codex-acp's npm
launcher leaves its native binary): the child's pid goes to the file named by
`CHATTY_CHILD_PID`, so a test can see it was ended. With `--upstream-error` every prompt
fails the way a model outage should be reported: a JSON-RPC -32603 whose `data.details`
says what the provider said.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

from acp import (
    RequestError,
    run_agent,
    update_agent_message_text,
    update_user_message_text,
)
from acp.interfaces import Client
from acp.schema import (
    AvailableCommand,
    AvailableCommandsUpdate,
    SessionInfoUpdate,
    UsageUpdate,
)


class ChattyAgent:
    def __init__(self) -> None:
        self.conn: Client | None = None
        self.history: dict[str, list[tuple[str, str]]] = {}
        self.cancelled: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def _later(self, session_id: str, *updates: Any) -> None:
        """Send session-level updates just after the response in flight."""

        async def send() -> None:
            await asyncio.sleep(0.02)
            assert self.conn is not None
            for update in updates:
                await self.conn.session_update(session_id=session_id, update=update)

        task = asyncio.create_task(send())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _commands(self) -> AvailableCommandsUpdate:
        return AvailableCommandsUpdate(
            session_update="available_commands_update",
            available_commands=[AvailableCommand(name="help", description="Say what I can do")],
        )

    async def initialize(self, protocol_version: int, **kwargs: Any) -> dict[str, Any]:
        return {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": {}}},
            "authMethods": [],
        }

    async def new_session(self, cwd: str, **kwargs: Any) -> dict[str, Any]:
        session_id = f"chatty-{len(self.history) + 1}"
        self.history[session_id] = []
        self._later(session_id, self._commands())
        return {"sessionId": session_id}

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> dict[str, Any]:
        assert self.conn is not None
        if "--upstream-error" in sys.argv:
            raise RequestError.internal_error(
                {"details": "provider answered 503: model overloaded, retry later"}
            )
        said = "".join(getattr(block, "text", "") for block in prompt)
        self.cancelled.discard(session_id)
        await self.conn.session_update(
            session_id=session_id,
            update=SessionInfoUpdate(session_update="session_info_update", title="A chat"),
        )
        await asyncio.sleep(0.2)  # "the model starts": session news came first
        words = ["Hello", "there."] if "count" not in said else [str(n) for n in range(500)]
        reply = []
        for word in words:
            if session_id in self.cancelled:
                break
            reply.append(word)
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(word + " ")
            )
            await asyncio.sleep(0.01)
        self.history[session_id].append((said, " ".join(reply) + " "))
        self._later(
            session_id,
            UsageUpdate(session_update="usage_update", used=42, size=1000),
            SessionInfoUpdate(session_update="session_info_update", title="A chat, answered"),
        )
        stop = "cancelled" if session_id in self.cancelled else "end_turn"
        return {"stopReason": stop}

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.add(session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> dict[str, Any]:
        assert self.conn is not None
        for said, reply in self.history.get(session_id, []):
            await self.conn.session_update(
                session_id=session_id, update=update_user_message_text(said)
            )
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(reply)
            )
        self._later(session_id, self._commands())
        return {}

    async def resume_session(self, cwd: str, session_id: str, **kwargs: Any) -> dict[str, Any]:
        self._later(session_id, self._commands())
        return {}

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main() -> None:
    agent: Any = ChattyAgent()
    await run_agent(agent, use_unstable_protocol=True)


if __name__ == "__main__":
    if "--launcher" in sys.argv:
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
        with open(os.environ["CHATTY_CHILD_PID"], "w", encoding="utf-8") as out:
            out.write(str(child.pid))
    asyncio.run(main())
    sys.exit(0)
