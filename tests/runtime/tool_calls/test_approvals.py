"""Durable approvals: the approval key of a command's shape, the project's `ApprovalMemory`
across sessions, and the session's own "always" per command shape (the decision that uses
them is pinned in `test_decision.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.permissions import (
    ModePolicy,
    PermissionAnswer,
    PermissionRequest,
)
from steerable_bridge.runtime.tool_calls.approvals import approval_key
from tests.runtime.harness import make_agent, of, prompt, scripted, text_tool

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.mark.parametrize(
    ("args", "key"),
    [
        ({"command": "pytest -q tests"}, "run_command:pytest"),
        ({"command": "  git status"}, "run_command:git status"),
        ({"command": "pytest; rm -rf /"}, None),
        ({"command": "make && make install"}, None),
        ({"command": "cat x | sh"}, None),
        ({"command": "echo $(id)"}, None),
        ({"command": "echo hi > f"}, None),
        ({"command": "FOO=1 make"}, None),
        ({"command": "echo 'unclosed"}, None),
        ({"command": ""}, None),
        ({"path": "a.txt"}, "run_command"),
    ],
)
def test_approval_keys(args: dict[str, Any], key: str | None) -> None:
    assert approval_key("run_command", args) == key


class Memory:
    """An in-memory ApprovalMemory that records what it was told."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], bool] = {}

    async def recall(self, root: str, key: str) -> bool | None:
        return self.answers.get((root, key))

    async def remember(self, root: str, key: str, allow: bool) -> None:
        self.answers[(root, key)] = allow


def asker(answers: list[str], asked: list[str]) -> Any:
    async def ask(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.name)
        option = answers.pop(0)
        outcome = "reject_once" if option == "reject_stop" else option
        return PermissionAnswer(outcome=outcome, option_id=option)  # type: ignore[arg-type]

    return ask


async def test_always_answers_are_kept_per_project(tmp_path: Any) -> None:
    memory = Memory()
    model = scripted(
        {"tool_calls": [call("a", "shell", command="pytest -q")]},
        {"text": "ok"},
        {"tool_calls": [call("b", "shell", command="pytest tests/x.py")]},
        {"text": "ok"},
        {"tool_calls": [call("c", "shell", command="pytest")]},
        {"text": "ok"},
    )
    shell = text_tool(
        "shell",
        kind="execute",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}},
    )
    agent = make_agent(model, tools=[shell], approval="ask")
    agent.approvals = memory
    asked: list[str] = []
    one = await agent.new_session(str(tmp_path / "p"))
    one.policy = ModePolicy(lambda: "default", asker(["allow_always", "allow_once"], asked))
    await prompt(one)
    assert memory.answers == {(str(tmp_path / "p"), "shell:pytest"): True}
    same_project = await agent.new_session(str(tmp_path / "p"))
    same_project.policy = ModePolicy(lambda: "default", asker([], asked))
    _, events = await prompt(same_project)
    assert asked == ["shell"] and of(events, ev.ToolFinished)[0].status == "completed"
    other_project = await agent.new_session(str(tmp_path / "q"))
    other_project.policy = ModePolicy(lambda: "default", asker(["reject_always"], asked))
    _, events = await prompt(other_project)
    assert asked == ["shell", "shell"]
    assert memory.answers[(str(tmp_path / "q"), "shell:pytest")] is False


def test_a_session_remembers_always_per_command_shape_and_old_tool_wide_answers_lapse() -> None:
    from steerable_bridge.runtime.model_context.projection import session_facts

    def resolved(call_id: str, key: str | None) -> ev.PermissionResolved:
        return ev.PermissionResolved(
            session_id="s",
            run_id="r",
            seq=0,
            ts=0,
            call_id=call_id,
            tool_name="run_command",
            outcome="allow_always",
            approval_key=key,
        )

    facts = session_facts([resolved("a", "run_command:git status"), resolved("b", None)])
    assert facts.always.get(approval_key("run_command", {"command": "git status -s"}) or "")
    for other in ("git log", "git -c alias.x='!touch PWNED' x", "rm -rf x"):
        key = approval_key("run_command", {"command": other})
        assert key is None or key not in facts.always  # a pre-upgrade "run_command" grant lapses
