"""Drive any ACP agent over stdio from Python, with the official `acp` SDK's client side.

`drive(launch)` spawns the agent a `thirdparty.AgentLaunch` describes (command, environment,
workspace) as a process group of its own (the validator's `agent_process`, which ends the
whole group, launcher children included), connects the SDK's `ClientSideConnection`,
records every JSON-RPC message raw in a conformance `Transcript` (so a test can assert on
exactly what the agent sent, however lenient the SDK's models are), and yields a
`DrivenAgent`: `initialize()`, `new_session()`, `prompt(session, text)` (returns the stop
reason), `text_since(session, start)` (the agent_message_chunk text), `permission_requests`
(every `session/request_permission` the agent sent, raw) and the decision the client gives
them (`"allow"`: the first allow_once option, else allow_always; `"reject"`: reject_once).
Every request is bounded by `within`; the agent's process group is ended when the block
exits.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal, cast

import anyio
from acp import PROTOCOL_VERSION, text_block
from acp.client.connection import ClientSideConnection
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    RequestPermissionResponse,
)

from steerable_bridge.conformance.validators.agent_process import agent_process
from steerable_bridge.conformance.validators.transcript import Transcript

if TYPE_CHECKING:
    from tests.interop.thirdparty import AgentLaunch

__all__ = ["DrivenAgent", "drive"]

Decision = Literal["allow", "reject"]


@dataclass
class _Client:
    """The client half: keeps nothing itself (the transcript is raw), answers permission."""

    decision: Decision = "allow"
    answered: list[str] = field(default_factory=list)

    def on_connect(self, conn: Any) -> None:
        return None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        wanted = ("allow_once", "allow_always") if self.decision == "allow" else ("reject_once",)
        for kind in wanted:
            for option in options:
                if option.kind == kind:
                    self.answered.append(option.option_id)
                    return RequestPermissionResponse(
                        outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                    )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from acp import RequestError

        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@dataclass
class DrivenAgent:
    """One live connection to a spawned agent (see the module docstring)."""

    conn: ClientSideConnection
    transcript: Transcript
    client: _Client
    launch: AgentLaunch
    timeout: float

    @property
    def permission_requests(self) -> list[dict[str, Any]]:
        return [
            e.message
            for e in self.transcript.entries
            if e.sender == "agent" and e.message.get("method") == "session/request_permission"
        ]

    def set_decision(self, decision: Decision) -> None:
        self.client.decision = decision

    async def initialize(self) -> dict[str, Any]:
        with anyio.fail_after(self.timeout):
            await self.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="steerable-bridge-interop", version="1"),
            )
        _, at = self.transcript.exchange("initialize", 0)
        result = self.transcript.entries[at].message.get("result") if at >= 0 else None
        return result if isinstance(result, dict) else {}

    async def new_session(self) -> str:
        with anyio.fail_after(self.timeout):
            created = await self.conn.new_session(cwd=str(self.launch.workspace), mcp_servers=[])
        return created.session_id

    async def prompt(self, session: str, text: str) -> str:
        """Send one prompt and wait (bounded) for its response; returns the stop reason."""
        with anyio.fail_after(self.timeout):
            answer = await self.conn.prompt(session_id=session, prompt=[text_block(text)])
        return str(answer.stop_reason)

    def updates_since(self, session: str, start: int) -> list[dict[str, Any]]:
        return [
            dict(e.message["params"].get("update") or {})
            for e in self.transcript.session_updates(session, start)
        ]

    def text_since(self, session: str, start: int) -> str:
        return "".join(
            str((u.get("content") or {}).get("text", ""))
            for u in self.updates_since(session, start)
            if u.get("sessionUpdate") == "agent_message_chunk"
        )

    stderr: IO[bytes] | None = None

    def dump(self) -> str:
        """The end of the transcript and of the agent's stderr, for assertion messages."""
        lines = [json.dumps(e.message)[:400] for e in self.transcript.entries[-40:]]
        if self.stderr is not None:
            self.stderr.flush()
            self.stderr.seek(0)
            tail = self.stderr.read().decode("utf-8", errors="replace").splitlines()[-20:]
            lines += ["-- stderr --", *tail]
        return "\n".join(lines)


@asynccontextmanager
async def drive(launch: AgentLaunch, *, within: float = 90.0) -> AsyncIterator[DrivenAgent]:
    """Spawn `launch`'s agent and yield a `DrivenAgent`; `within` bounds each request."""
    transcript = Transcript("client")
    client = _Client()
    with tempfile.TemporaryFile() as stderr:
        async with agent_process(
            launch.command, env=launch.env, cwd=str(launch.workspace), stderr=stderr
        ) as agent:
            process = agent.process
            assert process.stdin is not None and process.stdout is not None
            conn = ClientSideConnection(
                cast(Client, client),  # a plain class: unimplemented → method not found
                process.stdin,
                process.stdout,
                observers=[transcript.observe],
            )
            try:
                yield DrivenAgent(conn, transcript, client, launch, within, stderr)
            finally:
                await conn.close()
