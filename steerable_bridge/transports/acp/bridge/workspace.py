"""The bridged agent's `fs/*` and `terminal/*` requests, served inside `--workspace`.

`ChildWorkspace(environment)` answers what an ACP agent asks of its client: reading and
writing text files, and terminals. Everything goes through the runtime's `Environment` port
(the CLI hands in the local one, confined to the workspace and sandboxed like our own
commands), so a path outside the workspace, or one of the agent files we keep from commands,
is refused with the environment's code and remedy. A terminal runs its command (`command`
and `args`, shell-quoted, with its `env` in front) through `Environment.run` as soon as it
is created, in a task the workspace owns: `terminal/output` reports what it has printed so
far while it runs (its last `outputByteLimit` bytes, handed over by the port as they arrive)
and its exit status once it has exited, `wait_for_exit` waits for it (bounded), `kill`
cancels it (the port kills the whole process group) and `release` forgets it. With no
environment (`serve --acp-agent` without `--workspace`) every such request gets a JSON-RPC
error that says so. Every wait is bounded; `aclose()` kills what still runs.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.ports.environment import CommandResult, Environment, WorkspaceError

__all__ = ["ChildWorkspace", "client_capabilities", "refused"]

log = logging.getLogger("steerable_bridge.acp.bridge")

WORKSPACE_CODE = -32010
"""The JSON-RPC error code of a refused workspace request (outside it, or none offered)."""

COMMAND_TIMEOUT_S = 600.0
"""The longest a bridged agent's terminal command may run."""
OUTPUT_LIMIT = 1_000_000
MAX_TERMINALS = 32


def refused(code: str, message: str) -> RequestError:
    """A workspace request we will not serve, with our stable code and the remedy."""
    return RequestError(WORKSPACE_CODE, message, {"code": code})


@dataclass(slots=True)
class _Terminal:
    command: str
    cwd: str
    limit: int
    done: anyio.Event = field(default_factory=anyio.Event)
    result: CommandResult | None = None
    error: str | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    live: bytearray = field(default_factory=bytearray)
    """What it printed so far (its last `limit` bytes), for `terminal/output` meanwhile."""
    cut: bool = False

    def take(self, chunk: bytes) -> None:
        self.live.extend(chunk)
        if len(self.live) > self.limit:
            del self.live[: len(self.live) - self.limit]
            self.cut = True


class ChildWorkspace:
    """Files and terminals of the bridged agent (see the module docstring)."""

    def __init__(self, environment: Environment | None, root: str | None) -> None:
        self.environment = environment
        self.root = root
        self._terminals: dict[str, _Terminal] = {}
        self._count = 0
        self._tasks: anyio.abc.TaskGroup | None = None

    @property
    def offered(self) -> bool:
        return self.environment is not None

    def bind(self, tasks: anyio.abc.TaskGroup) -> None:
        """The task group that owns running terminals (the bridge's)."""
        self._tasks = tasks

    def _env(self, what: str) -> Environment:
        if self.environment is None:
            raise refused(
                "no_workspace",
                f"this bridge offers no workspace, so it cannot {what}; start"
                " `steerable-bridge serve --acp-agent ...` with --workspace DIR",
            )
        return self.environment

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        env = self._env(f"read {path}")
        try:
            with anyio.fail_after(60):
                return await env.read_text(path, line=line, limit=limit)
        except WorkspaceError as error:
            raise refused(error.code, error.message) from None
        except TimeoutError:
            raise refused("io_timeout", f"reading {path} took over 60 s; try again") from None

    async def write_text_file(self, path: str, content: str) -> None:
        env = self._env(f"write {path}")
        try:
            with anyio.fail_after(60):
                await env.write_text(path, content)
        except WorkspaceError as error:
            raise refused(error.code, error.message) from None
        except TimeoutError:
            raise refused("io_timeout", f"writing {path} took over 60 s; try again") from None

    # -- terminals --------------------------------------------------------------------------

    def create_terminal(
        self,
        command: str,
        args: Sequence[str] | None,
        env: Sequence[acp.EnvVariable] | None,
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        environment = self._env(f"run {command}")
        if self._tasks is None:
            raise refused("not_ready", "the bridge is shutting down; try again")
        if len(self._terminals) >= MAX_TERMINALS:
            raise refused(
                "too_many_terminals",
                f"{MAX_TERMINALS} terminals are open; release some with terminal/release",
            )
        argv = [command, *(args or ())]
        if env:
            argv = ["env", *(f"{v.name}={v.value}" for v in env), *argv]
        self._count += 1
        terminal_id = f"term_{self._count}"
        limit = min(output_byte_limit or OUTPUT_LIMIT, OUTPUT_LIMIT)
        terminal = _Terminal(command=shlex.join(argv), cwd=cwd or self.root or "/", limit=limit)
        self._terminals[terminal_id] = terminal
        self._tasks.start_soon(self._run, environment, terminal)
        return terminal_id

    async def _run(self, environment: Environment, terminal: _Terminal) -> None:
        try:
            with terminal.scope:
                terminal.result = await environment.run(
                    terminal.command,
                    cwd=terminal.cwd,
                    timeout_s=COMMAND_TIMEOUT_S,
                    output_limit=terminal.limit,
                    on_output=terminal.take,
                )
        except WorkspaceError as error:
            terminal.error = error.message
        except Exception as error:
            log.exception("a bridged agent's terminal command failed")
            terminal.error = f"{type(error).__name__}: {error}"
        finally:
            terminal.done.set()

    def _terminal(self, terminal_id: str) -> _Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise refused(
                "unknown_terminal", f"there is no terminal {terminal_id!r}; create one first"
            )
        return terminal

    def output(self, terminal_id: str) -> acp.TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        result = terminal.result
        if terminal.error is not None:
            return acp.TerminalOutputResponse(
                output=terminal.error,
                truncated=False,
                exit_status=acp.TerminalExitStatus(exit_code=127),
            )
        if result is None:  # still running: what it printed so far
            text = bytes(terminal.live).decode("utf-8", errors="replace")
            if terminal.cut:  # the cut may have split a character: drop what is left of it
                text = text.lstrip("\ufffd")
            return acp.TerminalOutputResponse(output=text, truncated=terminal.cut)
        return acp.TerminalOutputResponse(
            output=result.output,
            truncated=result.truncated,
            exit_status=_exit(result),
        )

    async def wait_for_exit(self, terminal_id: str) -> acp.WaitForTerminalExitResponse:
        terminal = self._terminal(terminal_id)
        with anyio.move_on_after(COMMAND_TIMEOUT_S + 30):
            await terminal.done.wait()
        status = _exit(terminal.result) if terminal.result is not None else None
        if terminal.error is not None:
            return acp.WaitForTerminalExitResponse(exit_code=127)
        if status is None:
            return acp.WaitForTerminalExitResponse(signal="SIGKILL")
        return acp.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    def kill(self, terminal_id: str) -> None:
        self._terminal(terminal_id).scope.cancel()

    def release(self, terminal_id: str) -> None:
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            terminal.scope.cancel()

    def aclose(self) -> None:
        """Kill every terminal still running."""
        for terminal in self._terminals.values():
            terminal.scope.cancel()
        self._terminals.clear()


def _exit(result: CommandResult) -> acp.TerminalExitStatus:
    if result.exit_code is None or result.exit_code < 0:
        return acp.TerminalExitStatus(signal="SIGKILL")
    return acp.TerminalExitStatus(exit_code=result.exit_code)


def client_capabilities(workspace: ChildWorkspace) -> acp.ClientCapabilities:
    """What the bridge tells the agent it offers: files and terminals only with a workspace;
    form and url elicitation always (a question becomes an AG-UI interrupt with its schema,
    or with the page in `metadata.url` for the AG-UI client to open)."""
    offered = workspace.offered
    return acp.ClientCapabilities(
        fs=acp.FileSystemCapabilities(read_text_file=offered, write_text_file=offered),
        terminal=offered,
        elicitation=acp.ElicitationCapabilities(
            form=acp.ElicitationFormCapabilities(), url=acp.ElicitationUrlCapabilities()
        ),
    )
