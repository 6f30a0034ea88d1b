"""One session's workspace kit: confinement, the local environment, tools and MCP servers.

Transports build a `WorkspaceKit` per session through the composition root (they never
import adapters themselves): `WorkspaceKit(cwd, additional_dirs, spawn, policy=...)`
confines the session to its folders, gives it a `LocalEnvironment` that runs commands
under `policy`, and offers the workspace tools plus the tools of the MCP servers
`start_mcp` brought up. A stdio server runs in the same bubblewrap sandbox as commands
(`confinement.py`: its own PID namespace and `/proc`, the workspace writable, the home
hidden) with the network its spec's `network` says (default `policy.mcp_network`), and is
refused under `--sandbox require` when there is no sandbox (unsandboxed, it is held in a
cgroup or by an environment tag, `containment.py`, like a command); its environment is its
configured `env` plus the variables `policy.pass_env` names (never the agent's own
secrets). `aclose()` stops those servers.
The MCP client (the `mcp` SDK, slow to import) is loaded only when a session actually has
servers. `fixed_workspace_tools(dir)` is the simpler form for a server whose sessions all
share one folder (AG-UI `serve --workspace DIR`): the tools carry their own environment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from steerable_bridge.adapters.tools import bwrap
from steerable_bridge.adapters.tools.confinement import (
    DEFAULT_POLICY,
    CommandPolicy,
    confine,
    confinement,
    refusal,
)
from steerable_bridge.adapters.tools.containment import Containment
from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.tool_env import passed_variables
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.values import Sandbox

if TYPE_CHECKING:
    from steerable_bridge.adapters.tools.mcp import McpServerConfig, McpServers

__all__ = ["WorkspaceKit", "fixed_workspace_tools"]


class WorkspaceKit:
    """Everything one session's workspace needs; see the module docstring."""

    def __init__(
        self,
        cwd: str,
        additional: Sequence[str],
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
        *,
        policy: CommandPolicy = DEFAULT_POLICY,
        **mcp_options: float,
    ) -> None:
        self.workspace = Workspace.of(cwd, additional)
        self.policy = policy
        self.environment = LocalEnvironment(self.workspace, policy=policy)
        self.mcp: McpServers | None = None
        self._spawn = spawn
        self._mcp_options = mcp_options
        self._tools = workspace_tools(self.workspace)

    def tools(self) -> tuple[Tool, ...]:
        return self._tools + (self.mcp.tools() if self.mcp is not None else ())

    async def start_mcp(self, servers: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Connect servers given as {name, transport, command, args, env} (stdio) or {name,
        transport, url, headers} (http, sse); messages for failures."""
        if not servers:
            return ()
        from steerable_bridge.adapters.tools.mcp import McpServerConfig, McpServers

        if self.mcp is None:
            self.mcp = McpServers(self._spawn, **self._mcp_options)
        local = [s for s in servers if s.get("transport", "stdio") == "stdio"]
        confined = await confinement(self.policy, "stdio MCP servers") if local else "none"
        refused: list[str] = []
        configs: list[McpServerConfig] = []
        for server in servers:
            name = str(server["name"])
            if server not in local:
                configs.append(
                    McpServerConfig(
                        name=name,
                        transport="sse" if server["transport"] == "sse" else "http",
                        url=str(server["url"]),
                        headers=dict(server.get("headers", {})),
                    )
                )
            elif confined == "none" and self.policy.sandbox == "require":
                error = refusal(f"the stdio MCP server {name!r}")
                refused.append(f"[{error.code}] {error.message}; its tools are unavailable")
            else:
                configs.append(self._stdio(server, confined))
        problems = await self.mcp.start(configs)
        return (*refused, *(problem.message for problem in problems))

    def _stdio(self, server: Mapping[str, Any], confined: Sandbox) -> McpServerConfig:
        """A stdio server's config: its command inside the sandbox when `confined`."""
        from steerable_bridge.adapters.tools.mcp import McpServerConfig

        program = [str(server["command"]), *map(str, server.get("args", ()))]
        if confined == "bwrap":
            network = server.get("network")
            program = confine(
                self.policy,
                program,
                cwd=self.workspace.cwd,
                writable=self.workspace.roots,
                network=self.policy.mcp_network if network is None else bool(network),
                private=self.workspace.private,
                shown=bwrap.program_paths(program, self.workspace.cwd),
            )
        env = {**passed_variables(self.policy.pass_env), **server.get("env", {})}
        held = None
        if confined == "none":  # no PID namespace: hold what it starts, as for commands
            held = Containment.open()
            program = held.argv(program)
            env = held.environ(env) or env
        return McpServerConfig(
            name=str(server["name"]),
            command=program[0],
            args=tuple(program[1:]),
            env=env,
            cwd=self.workspace.cwd,
            sandbox=confined,
            held=held,
        )

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()


def fixed_workspace_tools(
    directory: str, *, policy: CommandPolicy = DEFAULT_POLICY
) -> tuple[Tool, ...]:
    """Workspace tools over one fixed folder, for servers whose sessions share it."""
    workspace = Workspace.of(directory)
    return workspace_tools(workspace, environment=LocalEnvironment(workspace, policy=policy))
