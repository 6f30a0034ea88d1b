"""What every workspace tool needs from its call context: the environment, the workspace,
and paths confined to it.

A tool call carries the session's `Environment` (the editor over ACP, or the local disk)
and cwd in its `ToolContext`. `environment_of` refuses a session without one with a
remedy, `workspace_of` is the workspace the environment carries (else the cwd's),
`resolve` confines a path to it, and `failure` turns an `WorkspaceError` into the
`ToolFailure` the model sees, code and message kept.
"""

from __future__ import annotations

from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import Environment, WorkspaceError
from steerable_bridge.runtime.ports.tools import ToolContext, ToolFailure

__all__ = ["environment_of", "failure", "resolve", "workspace_of"]


def environment_of(ctx: ToolContext) -> Environment:
    """The session's environment; a session without one gets a failure naming the remedy."""
    if ctx.environment is None:
        raise ToolFailure(
            "no_workspace",
            "this session has no workspace, so files and commands are unavailable; start the"
            " server with --workspace DIR or open the session from an editor",
        )
    return ctx.environment


def workspace_of(ctx: ToolContext) -> Workspace:
    """The workspace the environment carries, else the one rooted at the call's cwd."""
    found = getattr(ctx.environment, "workspace", None)
    return found if isinstance(found, Workspace) else Workspace.of(ctx.cwd)


def failure(err: WorkspaceError) -> ToolFailure:
    """The tool failure for an environment error, its stable code and message kept."""
    return ToolFailure(err.code, err.message)


def resolve(ctx: ToolContext, path: str) -> str:
    """`path` as an absolute path inside the workspace; outside it, a failure."""
    try:
        return workspace_of(ctx).resolve(path)
    except WorkspaceError as err:
        raise failure(err) from err
