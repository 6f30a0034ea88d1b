"""A deliberately broken ACP agent (SDK agent side) for `check acp` to catch.

Its faults, each one a complaint editors have about real agents: protocolVersion sent as a
string; session/cancel ignored (the turn ends `end_turn`); an update sent after the prompt
response; session/load that replays only the agent's text; session/resume that replays;
unknown extension methods answered with an empty result; malformed JSON silently dropped;
asked for a tool (`[tool]` in the prompt), a permission request whose two options share one
id, and a tool call it then never reports finished, after writing a file by a relative path
and opening a terminal it never releases; a mode set with session/set_mode that session/load
forgets.
With `--needs-key` it is instead an agent that refuses every prompt for want of an API key;
with `--needs-login`, one that refuses to open a session until someone logs in.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from acp import RequestError, run_agent, update_agent_message_text, update_user_message_text
from acp.interfaces import Client
from acp.schema import PermissionOption, ToolCallUpdate

MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}


class BrokenAgent:
    def __init__(self) -> None:
        self.conn: Client | None = None
        self.texts: dict[str, list[str]] = {}
        self.prompts: dict[str, list[str]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> dict[str, Any]:
        return {
            "protocolVersion": "1",
            "agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": {}}},
            "authMethods": [],
        }

    async def new_session(self, cwd: str, **kwargs: Any) -> dict[str, Any]:
        if "--needs-login" in sys.argv:
            raise RequestError.auth_required({"hint": "run `example login` first"})
        session_id = f"broken-{len(self.texts) + 1}"
        self.texts[session_id] = []
        self.prompts[session_id] = []
        return {"sessionId": session_id, "modes": MODES}

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        return None  # accepted, and forgotten by load_session

    async def _say(self, session_id: str, text: str) -> None:
        assert self.conn is not None
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(text)
        )

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> dict[str, Any]:
        if "--needs-key" in sys.argv:
            raise RequestError.auth_required({"hint": "set EXAMPLE_API_KEY and restart"})
        self.prompts[session_id].append(prompt[0].text)
        if "[tool]" in prompt[0].text:
            return await self._ask_badly(session_id)
        for n in range(40):
            text = f"word{n} "
            self.texts[session_id].append(text)
            await self._say(session_id, text)
            await asyncio.sleep(0.01)

        async def straggler() -> None:
            await asyncio.sleep(0.05)
            await self._say(session_id, "(one more thing)")

        task = asyncio.create_task(straggler())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return {"stopReason": "end_turn"}

    async def _ask_badly(self, session_id: str) -> dict[str, Any]:
        assert self.conn is not None
        with contextlib.suppress(RequestError):
            await self.conn.write_text_file(session_id=session_id, path="notes.txt", content="x")
        await self.conn.create_terminal(session_id=session_id, command="true")
        call = ToolCallUpdate(tool_call_id="write-1", title="Write a file", status="pending")
        await self.conn.request_permission(
            session_id=session_id,
            tool_call=call,
            options=[
                PermissionOption(option_id="same", name="Allow", kind="allow_once"),
                PermissionOption(option_id="same", name="Always", kind="allow_always"),
            ],
        )
        return {"stopReason": "end_turn"}

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None  # ignored on purpose

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> dict[str, Any]:
        await self._say(session_id, "".join(self.texts.get(session_id, []))[:10])
        return {"modes": MODES}

    async def resume_session(self, cwd: str, session_id: str, **kwargs: Any) -> dict[str, Any]:
        assert self.conn is not None
        for text in self.prompts.get(session_id, []):
            await self.conn.session_update(
                session_id=session_id, update=update_user_message_text(text)
            )
        return {}

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main() -> None:
    agent: Any = BrokenAgent()
    await run_agent(agent, use_unstable_protocol=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
