"""The one child ACP agent process of a `serve --acp-agent` process, kept running.

`ChildAgent(argv, client=...)` spawns the command as the leader of a process group of its
own (`process.py`: stdin / stdout carry the SDK's JSON-RPC connection; its stderr is ours, so
its logs land in the server's; whatever it starts ends with it), sends `initialize` with the
client capabilities the bridge offers (and v1.25 `session.compaction`, whose updates
`compaction.py` reads off the wire), and holds the connection until the process exits.
`supervise()` — run by the bridge's task group — restarts it then, at once the first time
and with a doubling pause (up to `MAX_BACKOFF_S`) while it keeps dying young; every prompt
that was waiting on it ends with `acp_agent_exited`. Each start is an `incarnation`: a child
session opened by an earlier one must be loaded or resumed again. `ready()` waits (bounded)
for a started agent, or raises `AgentUnavailable` at once, with the reason, while a start
keeps failing (a wrong command, an agent that will not initialize).
"""

from __future__ import annotations

import logging
import os
import signal
from asyncio.subprocess import Process
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from acp import PROTOCOL_VERSION
from acp import schema as acp
from acp.client.connection import ClientSideConnection
from acp.utils import serialize_params
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from steerable_bridge import __version__
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.transports.acp.bridge.client import BridgeClient
from steerable_bridge.transports.acp.bridge.compaction import observer
from steerable_bridge.transports.acp.bridge.process import (
    agent_process,
    exited,
    signal_group,
)
from steerable_bridge.transports.acp.bridge.workspace import client_capabilities
from steerable_bridge.transports.acp.sdk_private import raw_connection

__all__ = ["AgentUnavailable", "ChildAgent", "Live"]

log = logging.getLogger("steerable_bridge.acp.bridge")

INIT_TIMEOUT_S = 60.0
START_WAIT_S = 90.0
MAX_BACKOFF_S = 30.0
STEADY_S = 60.0
"""An agent that ran this long before dying is restarted at once, not after a pause."""
LINE_LIMIT = 64 * 1024 * 1024
"""The longest JSON-RPC line read from the agent (a file's content can be large)."""


class AgentUnavailable(CodedError):
    """The child agent is not running and could not be started; `code` is stable."""


@dataclass(frozen=True, slots=True)
class Live:
    """A started agent: its connection, what it said to `initialize`, which start it is."""

    conn: ClientSideConnection
    init: acp.InitializeResponse
    incarnation: int
    process: Any

    @property
    def can_resume(self) -> bool:
        caps = self.init.agent_capabilities
        return bool(caps and caps.session_capabilities and caps.session_capabilities.resume)

    @property
    def can_load(self) -> bool:
        caps = self.init.agent_capabilities
        return bool(caps and caps.load_session)

    async def exit_note(self) -> str:
        """' (exit code N)' once the process has exited (waits briefly), else ''."""
        with anyio.move_on_after(2):
            await self.process.wait()
        code = self.process.returncode
        return "" if code is None else f" (exit code {code})"


class ChildAgent:
    """The child agent process and its restarts (see the module docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        client: BridgeClient,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        if not argv:
            raise ValueError("the ACP agent command is empty")
        self.argv = tuple(argv)
        self.name = name or os.path.basename(argv[0])
        self.client = client
        self.cwd = cwd
        self.env = env
        self.incarnation = 0
        self.live: Live | None = None
        self.init: acp.InitializeResponse | None = None
        """What the agent last answered to `initialize` (kept while it restarts)."""
        self._changed = anyio.Event()
        self._failure: str | None = None
        """Why the last start failed (None: the last start worked, or none was tried)."""
        self._starting = True
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def ready(self) -> Live:
        """The running agent; waits for a start under way (bounded)."""
        with anyio.move_on_after(START_WAIT_S):
            while True:
                if self.live is not None:
                    return self.live
                if not self._starting and self._failure is not None:
                    break
                await self._changed.wait()
        reason = self._failure or f"it did not start within {START_WAIT_S:g} s"
        raise AgentUnavailable(
            "acp_agent_unavailable",
            f"the ACP agent `{self.command}` is not running: {reason}; check the command (run"
            " it by hand to see its error) and retry",
        )

    def kill(self) -> None:
        """Kill the running process and its group (the supervisor starts a new one)."""
        live = self.live
        if live is not None:
            signal_group(live.process, signal.SIGKILL)

    async def stop(self) -> None:
        """Stop the agent for good: SIGTERM its process group (what is left of it is killed
        when its block ends, `process.py`) and wait for the supervisor to return (the
        caller bounds it)."""
        self._stop.set()
        live = self.live
        if live is not None:
            signal_group(live.process, signal.SIGTERM)
        await self._stopped.wait()

    async def supervise(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Run the agent, restarting it whenever it exits, until `stop()` or cancelled."""
        task_status.started()
        pause = 0.0
        try:
            while not self._stop.is_set():
                started = anyio.current_time()
                self._starting = True
                self._notify()
                await self._run_once()
                lived = anyio.current_time() - started
                pause = 0.0 if lived >= STEADY_S else min(MAX_BACKOFF_S, max(0.5, pause * 2))
                self._starting = False
                self._notify()
                if self._stop.is_set():
                    break
                log.warning("the ACP agent `%s` stopped; restarting in %.1f s", self.name, pause)
                with anyio.move_on_after(pause):
                    await self._stop.wait()
        finally:
            self._stopped.set()

    async def _run_once(self) -> None:
        self.incarnation += 1
        try:
            async with agent_process(
                self.argv,
                env=self.env if self.env is not None else dict(os.environ),
                cwd=self.cwd,
                limit=LINE_LIMIT,
            ) as process:
                assert process.stdin is not None and process.stdout is not None
                conn = ClientSideConnection(
                    self.client,
                    process.stdin,
                    process.stdout,
                    use_unstable_protocol=True,  # SDK 0.12 still routes elicitation/* as unstable
                    observers=[observer(self.client.compaction)],
                )
                try:
                    await self._serve(conn, process)
                finally:
                    with anyio.CancelScope(shield=True):
                        await conn.close()
        except OSError as error:
            self._failure = f"it could not be started: {error}"
            log.error("the ACP agent `%s`: %s", self.command, self._failure)
        except Exception as error:  # the SDK's shutdown of a dead process, say
            log.warning("the ACP agent `%s`: %s", self.name, _describe(error))

    async def _serve(self, conn: ClientSideConnection, process: Process) -> None:
        """Initialize the started agent, then hold it as `live` until its process exits."""
        try:
            with anyio.fail_after(INIT_TIMEOUT_S):
                init = await self._initialize(conn)
        except Exception as error:
            self._failure = f"initialize failed: {_describe(error)}"
            log.error("the ACP agent `%s`: %s", self.command, self._failure)
            return
        self._failure = None
        self.init = init
        self.live = Live(conn=conn, init=init, incarnation=self.incarnation, process=process)
        self._notify()
        log.info("the ACP agent `%s` is running (pid %s)", self.name, process.pid)
        try:
            await exited(process)
        finally:
            self.live = None
            note = "" if process.returncode is None else f" (exit code {process.returncode})"
            if self._stop.is_set():
                log.info("the ACP agent `%s` stopped%s", self.name, note)
                then = "the server is shutting down"
            else:
                log.warning("the ACP agent `%s` exited%s", self.name, note)
                then = "it is being restarted — send the message again to continue"
            self.client.fail_all(
                "acp_agent_exited",
                f"the ACP agent `{self.name}` exited during this run{note}; {then}",
            )

    async def _initialize(self, conn: ClientSideConnection) -> acp.InitializeResponse:
        """`initialize` with the capabilities the bridge offers, plus the v1.25
        `session.compaction` the SDK's models cannot hold (added to the serialized params;
        the answer is read with the SDK's model)."""
        request = acp.InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=client_capabilities(self.client.workspace),
            client_info=acp.Implementation(
                name="steerable-bridge", title="steerable-bridge", version=__version__
            ),
        )
        params = serialize_params(request)
        params["clientCapabilities"].setdefault("session", {})["compaction"] = {}
        answer = await raw_connection(conn).send_request("initialize", params)
        return acp.InitializeResponse.model_validate(answer)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
