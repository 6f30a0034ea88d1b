"""One session's workspace kit: confinement, the local environment, tools and MCP servers.

Transports build a `WorkspaceKit` per session through the composition root (they never
import adapters themselves): `WorkspaceKit(cwd, additional_dirs, spawn)` confines the
session to its folders, gives it a `LocalEnvironment`, and offers the workspace tools plus
the tools of the MCP servers `start_mcp` brought up. `aclose()` stops those servers.
`fixed_workspace_tools(dir)` is the simpler form for a server whose sessions all share one
folder (AG-UI `serve --workspace DIR`): the tools carry their own local environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.mcp import McpServerConfig, McpServers, Spawn
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.workspace import workspace_tools
from steerable_bridge.runtime.tools import Tool

__all__ = ["WorkspaceKit", "fixed_workspace_tools"]


class WorkspaceKit:
    """Everything one session's workspace needs; see the module docstring."""

    def __init__(
        self, cwd: str, additional: Sequence[str], spawn: Spawn, **mcp_options: float
    ) -> None:
        self.workspace = Workspace.of(cwd, additional)
        self.environment = LocalEnvironment(self.workspace)
        self.mcp = McpServers(spawn, **mcp_options)
        self._tools = workspace_tools(self.workspace)

    def tools(self) -> tuple[Tool, ...]:
        return self._tools + self.mcp.tools()

    async def start_mcp(self, servers: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Start stdio servers given as {name, command, args, env}; messages for failures."""
        configs = [
            McpServerConfig(
                name=str(server["name"]),
                command=str(server["command"]),
                args=tuple(server.get("args", ())),
                env=dict(server.get("env", {})),
                cwd=self.workspace.cwd,
            )
            for server in servers
        ]
        problems = await self.mcp.start(configs)
        return tuple(problem.message for problem in problems)

    async def aclose(self) -> None:
        await self.mcp.aclose()


def fixed_workspace_tools(directory: str) -> tuple[Tool, ...]:
    """Workspace tools over one fixed folder, for servers whose sessions share it."""
    workspace = Workspace.of(directory)
    return workspace_tools(workspace, environment=LocalEnvironment(workspace))
