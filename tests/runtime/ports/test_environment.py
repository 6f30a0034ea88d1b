"""The environment port (`runtime/ports/environment.py`): both implementations — the local disk
and processes (`adapters/tools/local_env.py`) and the editor's over ACP
(`transports/acp/client_env.py`) — offer every method with the port's parameters, kinds and
defaults, so a tool never knows which it has; a tool reaches the session's environment
through its context; a `CommandResult` ended normally and unconfined unless it says
otherwise; `WorkspaceError` carries a stable code and a message naming the remedy."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.environment import CommandResult, Environment, WorkspaceError
from steerable_bridge.runtime.ports.tools import ToolContext, ToolResult
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp.client_env import ClientEnvironment
from tests.runtime.harness import make_agent, of, prompt, scripted, text_tool

PORT_METHODS = ("read_text", "write_text", "run", "sandbox")


@pytest.mark.parametrize("cls", [LocalEnvironment, ClientEnvironment])
@pytest.mark.parametrize("name", PORT_METHODS)
def test_each_environment_offers_the_ports_methods_as_the_port_declares(
    cls: type, name: str
) -> None:
    wanted, given = getattr(Environment, name), getattr(cls, name)
    assert inspect.iscoroutinefunction(given), f"{cls.__name__}.{name} must be async"
    ours = inspect.signature(wanted).parameters
    theirs = inspect.signature(given).parameters
    assert list(theirs) == list(ours), f"{cls.__name__}.{name}"
    for param, spec in ours.items():
        assert (theirs[param].kind, theirs[param].default) == (spec.kind, spec.default), param


def test_a_command_result_ended_normally_and_unconfined_unless_it_says_so() -> None:
    result = CommandResult(exit_code=0, output="ok")
    assert not result.truncated and not result.timed_out
    assert result.terminal_id is None and result.sandbox == "none"
    assert CommandResult(exit_code=None, output="", timed_out=True).exit_code is None


def test_a_workspace_error_is_a_coded_error_naming_the_remedy() -> None:
    error = WorkspaceError("outside_workspace", "the path is outside", "use a path inside")
    assert isinstance(error, CodedError) and error.code == "outside_workspace"
    assert str(error) == "the path is outside; use a path inside"


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_tool_reaches_the_sessions_environment_through_its_context(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("from the disk\n", encoding="utf-8")
    seen: list[Any] = []

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        seen.append(ctx.environment)
        assert ctx.environment is not None
        text = await ctx.environment.read_text(str(tmp_path / "notes.txt"))
        return ToolResult(content=(TextPart(text=text),))

    model = scripted(
        {"tool_calls": [{"id": "c1", "name": "peek", "arguments": {"text": "x"}}]},
        {"text": "done"},
    )
    session = await make_agent(model, tools=[text_tool("peek", handler=handler)]).new_session(
        str(tmp_path)
    )
    environment = LocalEnvironment(Workspace.of(str(tmp_path)))
    session.environment = environment
    _, events = await prompt(session)
    assert seen == [environment]
    assert of(events, ev.ToolFinished)[0].content == (TextPart(text="from the disk\n"),)
