"""`run`'s terminal question offers "always" only for a call with a shape to keep."""

from __future__ import annotations

import json

from steerable_bridge.commands.approval_prompt import question
from steerable_bridge.runtime.ports.permissions import PermissionRequest
from steerable_bridge.runtime.values import PermissionOption, ToolCall

ONCE = (
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
)
ALWAYS = PermissionOption(
    option_id="allow_always", name="Always allow `git status` here", kind="allow_always"
)


def _request(command: str, options: tuple[PermissionOption, ...]) -> PermissionRequest:
    call = ToolCall(
        call_id="c1", name="run_command", arguments_json=json.dumps({"command": command})
    )
    return PermissionRequest(
        session_id="s", call=call, tool_kind="execute", title=f"run {command}", options=options
    )


def test_a_command_that_could_smuggle_another_is_not_offered_always() -> None:
    asked, answers = question(_request("git -c alias.x='!touch PWNED' x", ONCE))
    assert "[a]" not in asked and "[N]ever" not in asked
    assert answers == {"y": "allow_once"}  # typing "a" is a plain reject, never a grant


def test_a_reviewed_shape_names_what_always_covers() -> None:
    asked, answers = question(_request("git status", (*ONCE, ALWAYS)))
    assert "[a] Always allow `git status` here" in asked
    assert answers["a"] == "allow_always" and answers["N"] == "reject_always"


def test_control_characters_in_the_title_are_escaped() -> None:
    asked, _ = question(_request("echo \x1b[31mred", ONCE))
    assert "\x1b" not in asked
