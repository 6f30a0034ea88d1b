"""The permission port (`runtime/ports/permissions.py`): `StaticPolicy` (`--approve all|none|ask`)
and `ModePolicy` (the ACP modes `default`, `accept-edits`, `read-only`) decide each call by
its tool kind, name the remedy when they deny, defer instead of asking when no one can be
asked, read the mode afresh on every verdict, and hand `ask` to their asker (which refuses
when none is given). The loop's use of these answers is pinned in `test_loop.py`."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.ports.permissions import (
    DEFAULT_OPTIONS,
    MODES,
    ModePolicy,
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.values import ToolCall, ToolKind

CHANGING: tuple[ToolKind, ...] = ("edit", "delete", "move", "execute", "switch_mode", "other")


def request(kind: ToolKind) -> PermissionRequest:
    call = ToolCall(call_id="c1", name="tool", arguments_json="{}")
    return PermissionRequest(session_id="s1", call=call, tool_kind=kind, title="Run tool")


async def allow(req: PermissionRequest) -> PermissionAnswer:
    return PermissionAnswer(outcome="allow_once", option_id="allow_once")


def test_the_default_options_are_the_four_acp_answers_and_reject_and_stop() -> None:
    assert [o.option_id for o in DEFAULT_OPTIONS] == [
        "allow_once", "allow_always", "reject_once", "reject_always", "reject_stop",
    ]  # fmt: skip
    stop = DEFAULT_OPTIONS[-1]
    assert stop.kind == "reject_once" and stop.name == "Reject and stop"
    assert request("edit").options == DEFAULT_OPTIONS


def test_every_mode_has_a_name_and_a_description() -> None:
    assert set(MODES) == {"default", "accept-edits", "read-only"}
    assert all(name and description for name, description in MODES.values())


@pytest.mark.parametrize("kind", [*CHANGING, "fetch", "read"])
def test_approve_all_allows_every_kind(kind: ToolKind) -> None:
    assert StaticPolicy("all").verdict(request(kind)) == ("allow", "")


@pytest.mark.parametrize("kind", CHANGING)
def test_approve_none_denies_and_names_the_flag(kind: ToolKind) -> None:
    verdict, reason = StaticPolicy("none").verdict(request(kind))
    assert verdict == "deny" and "--approve none" in reason


def test_network_tools_run_without_asking_unless_the_mode_is_read_only() -> None:
    assert StaticPolicy("none").verdict(request("fetch")) == ("allow", "")
    assert StaticPolicy("ask").verdict(request("fetch")) == ("allow", "")
    for mode in ("default", "accept-edits"):
        assert ModePolicy(lambda m=mode: m).verdict(request("fetch")) == ("allow", "")
    verdict, reason = ModePolicy(lambda: "read-only").verdict(request("fetch"))
    assert verdict == "deny" and "network" in reason


@pytest.mark.parametrize("kind", CHANGING)
def test_approve_ask_asks_or_defers_when_no_one_can_be_asked(kind: ToolKind) -> None:
    assert StaticPolicy("ask").verdict(request(kind)) == ("ask", "")
    assert StaticPolicy("ask", defer=True).verdict(request(kind)) == ("defer", "")


@pytest.mark.parametrize(
    ("mode", "kind", "verdict"),
    [
        ("default", "edit", "ask"),
        ("default", "execute", "ask"),
        ("default", "delete", "ask"),
        ("accept-edits", "edit", "allow"),
        ("accept-edits", "execute", "ask"),
        ("accept-edits", "move", "ask"),
        ("read-only", "edit", "deny"),
        ("read-only", "execute", "deny"),
    ],
)
def test_each_mode_decides_by_tool_kind(mode: str, kind: ToolKind, verdict: str) -> None:
    assert ModePolicy(lambda: mode).verdict(request(kind))[0] == verdict


def test_read_only_says_how_to_allow_changes() -> None:
    _, reason = ModePolicy(lambda: "read-only").verdict(request("edit"))
    assert "switch mode" in reason


def test_a_mode_change_applies_to_the_next_verdict() -> None:
    mode = ["default"]
    policy = ModePolicy(lambda: mode[0], defer=True)
    assert policy.verdict(request("edit")) == ("defer", "")
    mode[0] = "accept-edits"
    assert policy.verdict(request("edit")) == ("allow", "")
    mode[0] = "read-only"
    assert policy.verdict(request("edit"))[0] == "deny"


@pytest.mark.anyio
async def test_ask_goes_to_the_asker_and_refuses_without_one() -> None:
    for policy in (StaticPolicy("ask", allow), ModePolicy(lambda: "default", allow)):
        assert await policy.ask(request("edit")) == PermissionAnswer(
            outcome="allow_once", option_id="allow_once"
        )
    for policy in (StaticPolicy("ask"), ModePolicy(lambda: "default")):
        answer = await policy.ask(request("edit"))
        assert answer.outcome == "reject_once" and answer.option_id == "reject_once"
