"""Play a scenario through the real transports: the ACP process over stdio, the AG-UI app over HTTP.

`run_acp(scenario, channel=...)` spawns `steerable-bridge acp` (this interpreter, the
scenario's script as `--model scripted:PATH`, the scenario tools via `--tools-module`) and
drives it with the SDK's client side: `initialize` (opting in to `_steerable/event` when
`channel`), `session/new`, one `session/prompt` per turn; it answers permission requests as
the turn says and cancels or steers (`_steerable/steer`) when the turn's trigger kind shows
up in an update's `_meta.steerable.kind`. It returns the transcript, recorded from the SDK's
own stream observer. `run_agui(scenario)` serves `create_app` with a real uvicorn on
127.0.0.1 (port 0), POSTs one RunAgentInput per turn with httpx, reads the SSE with
`httpx-sse`, steers with a second POST (`forwardedProps.steerable.steer`) and cancels by
disconnecting; it returns each response's input and events, and the thread's log as the
server recorded it. Every wait is bounded; the child's stderr is discarded;
the server and the process are stopped before returning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
import uvicorn
from acp import schema as s
from acp import spawn_agent_process
from httpx_sse import aconnect_sse

from steerable_bridge.conformance import scenario_tools
from steerable_bridge.conformance.decode_agui import AguiDecoder
from steerable_bridge.conformance.scenarios import (
    Scenario,
    Turn,
    TurnActions,
    quality_json,
    scenario_agent,
)
from steerable_bridge.conformance.transcript import TranscriptRecorder, WireMessage
from steerable_bridge.runtime.agent_sessions.agent import Agent
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.questions import question_id_for
from steerable_bridge.transports.agui.app import create_app

__all__ = ["AguiExchange", "AguiRun", "AguiServer", "agui_server", "run_acp", "run_agui"]


# -- ACP ----------------------------------------------------------------------------------


_CAPABILITIES = s.ClientCapabilities(
    elicitation=s.ElicitationCapabilities(
        form=s.ElicitationFormCapabilities(), url=s.ElicitationUrlCapabilities()
    )
)
"""What the scenario client advertises: it answers form and url questions
(`elicitation/create`) and takes `elicitation/complete`."""


class _Client:
    """The editor side: answers permission requests, fires the turn's triggers."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.session_id = ""
        self.turn: Turn = Turn()
        self.actions = TurnActions(Turn(), self._act)
        self.tasks: anyio.abc.TaskGroup | None = None

    def start(self, turn: Turn) -> None:
        self.turn = turn
        self.actions = TurnActions(turn, self._act)

    def _act(self, name: str, text: str) -> None:
        assert self.tasks is not None
        if name == "cancel":
            self.tasks.start_soon(self._cancel)
        elif name == "steer":
            self.tasks.start_soon(self._steer, text)

    async def _cancel(self) -> None:
        await self.conn.cancel(session_id=self.session_id)

    async def _steer(self, text: str) -> None:
        with anyio.fail_after(10):
            await self.conn.ext_method(
                "steerable/steer", {"sessionId": self.session_id, "text": text}
            )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        meta = update.field_meta or {}
        kind = (meta.get("steerable") or {}).get("kind")
        if isinstance(kind, str):
            for name, text in self.actions.due(kind):
                self._act(name, text)

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> s.RequestPermissionResponse:
        choice = self.turn.permission
        return s.RequestPermissionResponse(
            outcome=s.AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        choice = self.turn.question
        if choice.action == "accept":
            return s.AcceptElicitationResponse(action="accept", content=choice.content)
        if choice.action == "decline":
            return s.DeclineElicitationResponse(action="decline")
        return s.CancelElicitationResponse(action="cancel")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        """A url question is over; the transcript keeps the notification, nothing to show."""

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the scenario client offers no file system")

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the scenario client offers no file system")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn


async def run_acp(
    scenario: Scenario, *, channel: bool, reload: bool = False, timeout_s: float = 60.0
) -> list[WireMessage]:
    """The transcript of the scenario played against a spawned `steerable-bridge acp`.

    `reload` adds, after the turns, `session/load` of the same session (which must replay
    it) and `session/resume` (which must not).
    """
    recorder = TranscriptRecorder()
    client = _Client()
    with tempfile.TemporaryDirectory(prefix="steerable-scenario-") as folder:
        script = Path(folder) / "script.json"
        script.write_text(scenario.script.model_dump_json(), encoding="utf-8")
        args = [
            "-m", "steerable_bridge.cli", "acp",
            "--model", f"scripted:{script}",
            "--approve", "ask",
            "--max-steps", str(scenario.max_steps),
            "--quality", quality_json(scenario.quality),
            "--tools-module", str(scenario_tools.__file__),
        ]  # fmt: skip
        env = {**os.environ, "STEERABLE_DEMO_PACE_MS": "0", "STEERABLE_STORAGE": "memory"}
        with anyio.fail_after(timeout_s):
            async with (
                spawn_agent_process(
                    cast(Any, client),
                    sys.executable,
                    *args,
                    env=env,
                    cwd=folder,
                    transport_kwargs={"stderr": subprocess.DEVNULL},
                    observers=[recorder],
                    use_unstable_protocol=True,  # the SDK still calls elicitation unstable
                ) as (conn, _process),
                anyio.create_task_group() as tasks,
            ):
                client.conn, client.tasks = conn, tasks
                meta: dict[str, Any] = {"steerable": {"events": True}} if channel else {}
                await conn.initialize(protocol_version=1, client_capabilities=_CAPABILITIES, **meta)
                session = await conn.new_session(cwd=folder, mcp_servers=[])
                client.session_id = session.session_id
                for turn in scenario.turns:
                    client.start(turn)
                    text = "/compact" if turn.compact else turn.prompt or ""
                    blocks: list[Any] = [s.TextContentBlock(type="text", text=text)]
                    try:
                        await conn.prompt(session_id=session.session_id, prompt=blocks)
                    except Exception as error:  # a failed run answers with a JSON-RPC error
                        if type(error).__name__ != "RequestError":
                            raise
                if reload:
                    await conn.load_session(
                        cwd=folder, session_id=session.session_id, mcp_servers=[]
                    )
                    await conn.resume_session(cwd=folder, session_id=session.session_id)
                await anyio.sleep(0.05)  # let notifications sent after the last response land
    return recorder.transcript()


# -- AG-UI --------------------------------------------------------------------------------


@dataclass(slots=True)
class AguiExchange:
    """One POST: the RunAgentInput sent and the AG-UI events received, as JSON objects."""

    run_input: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    steer: bool = False
    disconnected: bool = False


def _thread(exchanges: list[AguiExchange]) -> list[dict[str, Any]]:
    """The messages a client holds after its last run: that run's last MESSAGES_SNAPSHOT."""
    for exchange in reversed(exchanges):
        if exchange.steer:
            continue
        for raw in reversed(exchange.events):
            if raw.get("type") == "MESSAGES_SNAPSHOT":
                return [m for m in raw["messages"] if m.get("role") != "activity"]
        return []
    return []


def _run_input(
    thread_id: str, index: int, turn: Turn, held: list[dict[str, Any]]
) -> dict[str, Any]:
    """The RunAgentInput a client sends: the thread it holds (as HttpAgent does) plus the
    turn's new messages."""
    messages: list[dict[str, Any]] = list(held)
    if turn.prompt:
        messages.append({"id": f"user-{index}", "role": "user", "content": turn.prompt})
    for answer in turn.tool_results:
        message: dict[str, Any] = {
            "id": f"tool-{answer.call_id}",
            "role": "tool",
            "toolCallId": answer.call_id,
            "content": answer.text,
        }
        if answer.is_error:
            message["error"] = answer.text
        messages.append(message)
    data: dict[str, Any] = {"threadId": thread_id, "runId": f"run-{index}", "messages": messages}
    if turn.compact:
        data["forwardedProps"] = {"steerable": {"command": "compact"}}
    if turn.frontend_tools:
        data["tools"] = [t.model_dump() for t in turn.frontend_tools]
    if turn.state is not None:
        data["state"] = turn.state
    resume = [
        {
            "interruptId": f"approval-{a.call_id}",
            "status": "resolved",
            "payload": {"approved": a.approved},
        }
        for a in turn.resume
    ]
    for q in turn.answers:
        payload: dict[str, Any] = {"action": q.action}
        if q.content is not None:
            payload["content"] = q.content
        resume.append(
            {"interruptId": question_id_for(q.call_id), "status": "resolved", "payload": payload}
        )
    if resume:
        data["resume"] = resume
    return data


async def _post(client: httpx.AsyncClient, url: str, exchange: AguiExchange) -> AguiExchange:
    async with aconnect_sse(client, "POST", url, json=exchange.run_input) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            exchange.events.append(json.loads(sse.data))
    return exchange


@dataclass(slots=True)
class AguiServer:
    """A running AG-UI app: its endpoint URL and the agent behind it."""

    url: str
    agent: Agent

    async def log(self, thread_id: str, *, timeout_s: float = 10.0) -> list[LoopEvent]:
        """The thread's session log once no run holds it (what the server recorded); from
        the store when the server let go of it (a run whose client left)."""
        session = self.agent.get(thread_id)
        if session is None:
            return await self.agent.store.read(thread_id)
        with anyio.fail_after(timeout_s):
            while session.running:  # noqa: ASYNC110 - a session has no idle event to wait on
                await anyio.sleep(0.01)
        return list(session.log.view())


@dataclass(slots=True)
class AguiRun:
    """A scenario played over HTTP: every POST, and the thread's log on the server after."""

    exchanges: list[AguiExchange]
    log: list[LoopEvent]

    @property
    def received(self) -> list[dict[str, Any]]:
        """The events of the scenario's own runs (not the steering POSTs), in order."""
        return [raw for x in self.exchanges if not x.steer for raw in x.events]

    @property
    def cut(self) -> bool:
        """The client disconnected (cancelled) during a run."""
        return any(x.disconnected for x in self.exchanges)


@asynccontextmanager
async def agui_server(scenario: Scenario, *, timeout_s: float = 10.0) -> AsyncIterator[AguiServer]:
    """A real uvicorn on 127.0.0.1 (a free port) serving the AG-UI app for `scenario`.

    Yields the endpoint (`.../agent`) and the agent; the server is stopped on exit.
    """
    agent = scenario_agent(scenario)
    app = create_app(LocalPort(agent), cwd="/")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(timeout_s):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield AguiServer(url=f"http://127.0.0.1:{port}/agent", agent=agent)
        finally:
            server.should_exit = True


async def run_agui(scenario: Scenario, *, timeout_s: float = 60.0) -> AguiRun:
    """Every POST of the scenario against a real uvicorn serving the AG-UI app.

    A cancel trigger disconnects (AG-UI has no other way to stop a run); the stream then
    ends early, and the server's log shows how the run was closed.
    """
    exchanges: list[AguiExchange] = []
    thread_id = f"thread-{scenario.name}"
    with anyio.fail_after(timeout_s):
        async with (
            agui_server(scenario) as served,
            httpx.AsyncClient(timeout=httpx.Timeout(timeout_s)) as client,
        ):
            decoder = AguiDecoder()  # the thread's streams, in order: what requests refer to
            for index, turn in enumerate(scenario.turns):
                await _turn(client, served.url, thread_id, index, turn, exchanges, decoder)
            log = await served.log(thread_id)
    return AguiRun(exchanges=exchanges, log=log)


async def _turn(
    client: httpx.AsyncClient,
    url: str,
    thread_id: str,
    index: int,
    turn: Turn,
    exchanges: list[AguiExchange],
    decoder: AguiDecoder,
) -> None:
    exchange = AguiExchange(run_input=_run_input(thread_id, index, turn, _thread(exchanges)))
    exchanges.append(exchange)
    async with anyio.create_task_group() as side:

        def act(name: str, text: str) -> None:
            if name == "cancel":
                exchange.disconnected = True
                return
            if name != "steer":
                raise ValueError(f"AG-UI scenarios cannot {name}; list only 'acp' for them")
            steer = AguiExchange(
                run_input={
                    "threadId": thread_id,
                    "runId": f"steer-{index}",
                    "messages": [{"id": f"steer-{index}", "role": "user", "content": text}],
                    "forwardedProps": {"steerable": {"steer": True}},
                },
                steer=True,
            )
            exchanges.append(steer)
            side.start_soon(_post, client, url, steer)

        actions = TurnActions(turn, act)
        async with aconnect_sse(client, "POST", url, json=exchange.run_input) as source:
            source.response.raise_for_status()
            async for sse in source.aiter_sse():
                raw = json.loads(sse.data)
                exchange.events.append(raw)
                event = decoder.decode(raw, thread_id)
                if event is not None:
                    for name, text in actions.due(event.kind):
                        act(name, text)
                if exchange.disconnected:
                    break  # leaving the block closes the response: the server sees a disconnect
