"""The permission decision for one call (`runtime/tool_calls/decision.py`), driven through
real turns: a tool that changes things is asked about and runs only when allowed; read-only
tools and `--approve all` never ask, `--approve none` denies without asking; an "always"
answer is remembered across turns and a reload; an unanswered request times out as a denial
and a withdrawn one does not run the call; "Reject and stop" ends the turn; read-only mode
keeps fetch tools off the network; a deferred approval becomes an interrupt with
`APPROVAL_SCHEMA`, and the client's resume runs, rejects or stops the call, or keeps an
"always" answer. Durable approvals per project are pinned in `test_approvals.py`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.ports.permissions import (
    ModePolicy,
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.ports.tools import Tool, ToolContext, ToolResult
from steerable_bridge.runtime.tool_calls.decision import APPROVAL_SCHEMA
from steerable_bridge.runtime.turns.turn import ResumeDecision
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import (
    answer,
    assert_every_call_finished_once,
    assert_well_formed,
    call,
    finished,
    kinds,
    make_agent,
    new_session,
    of,
    prompt,
    requests,
    scripted,
    text_tool,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def asker(answers: list[str], asked: list[str]) -> Any:
    async def ask(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request.call.name)
        option = answers.pop(0)
        outcome = "reject_once" if option == "reject_stop" else option
        return PermissionAnswer(outcome=outcome, option_id=option)  # type: ignore[arg-type]

    return ask


# -- asking the client and the session's mode --------------------------------------------


def counting_asker(outcome: str) -> tuple[list[PermissionRequest], Any]:
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request)
        return PermissionAnswer(outcome=outcome, option_id=outcome)  # type: ignore[arg-type]

    return asked, ask


def edit_tool(ran: list[str]) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args["text"])
        return ToolResult(content=(TextPart(text="written"),))

    return text_tool("write", kind="edit", handler=handler)


@pytest.mark.parametrize(("outcome", "runs"), [("allow_once", True), ("reject_once", False)])
async def test_permission_is_asked_before_a_tool_that_changes_things(
    outcome: str, runs: bool
) -> None:
    ran: list[str] = []
    model = scripted({"tool_calls": [call("c1", "write", text="x")]}, {"text": "ok"})
    session = await new_session(model, tools=[edit_tool(ran)], approval="ask")
    asked, ask = counting_asker(outcome)
    session.policy = StaticPolicy("ask", ask)
    _, seen = await prompt(session)
    assert [r.call.call_id for r in asked] == ["c1"]
    assert asked[0].tool_kind == "edit" and asked[0].title == "Write: x"
    requested = of(seen, ev.PermissionRequested)[0]
    assert {o.kind for o in requested.options} >= {"allow_once", "reject_once"}
    assert of(seen, ev.PermissionResolved)[0].outcome == outcome
    assert ran == (["x"] if runs else [])
    result = of(seen, ev.ToolFinished)[0]
    if runs:
        assert result.status == "completed"
    else:
        assert result.error is not None and result.error.code == "permission_denied"
        assert requests(session)[1].messages[-1].is_error
    assert kinds(seen).index("permission_resolved") < kinds(seen).index("tool_finished")


async def test_read_only_tools_and_approve_all_never_ask() -> None:
    ran: list[str] = []
    model = scripted(
        {"tool_calls": [call("c1", "write", text="x"), call("c2", text="y")]}, {"text": "ok"}
    )
    session = await new_session(model, tools=[edit_tool(ran), text_tool()], approval="all")
    _, seen = await prompt(session)
    assert ran == ["x"]
    assert of(seen, ev.PermissionRequested) == []


async def test_approve_none_denies_without_asking() -> None:
    ran: list[str] = []
    model = scripted({"tool_calls": [call("c1", "write", text="x")]}, {"text": "ok"})
    session = await new_session(model, tools=[edit_tool(ran)], approval="none")
    _, seen = await prompt(session)
    assert ran == [] and of(seen, ev.PermissionRequested) == []
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == "permission_denied"
    assert "--approve none" in error.message


@pytest.mark.parametrize(("always", "runs"), [("allow_always", True), ("reject_always", False)])
async def test_always_answers_are_remembered_across_turns_and_a_reload(
    always: str, runs: bool
) -> None:
    ran: list[str] = []
    store = MemoryStore()
    model = scripted({"tool_calls": [call("c", "write", text="x")]}, {"text": "ok"}, loop=True)
    agent = make_agent(model, tools=[edit_tool(ran)], approval="ask", store=store)
    session = await agent.new_session("/work")
    asked, ask = counting_asker(always)
    session.policy = StaticPolicy("ask", ask)
    await prompt(session, "one")
    _, second = await prompt(session, "two")
    assert len(asked) == 1
    assert of(second, ev.PermissionRequested) == []
    # A fresh agent on the same store rebuilds the session from its log and still knows.
    reloaded_agent = make_agent(model, tools=[edit_tool(ran)], approval="ask", store=store)
    reloaded = await reloaded_agent.load_session(session.id)
    asked_again, ask_again = counting_asker("reject_once")
    reloaded.policy = StaticPolicy("ask", ask_again)
    _, third = await prompt(reloaded, "three")
    assert asked_again == []
    assert ran == (["x", "x", "x"] if runs else [])
    statuses = [e.status for e in of(third, ev.ToolFinished)]
    assert statuses == (["completed"] if runs else ["failed"])


async def test_an_unanswered_permission_request_times_out_as_a_denial() -> None:
    ran: list[str] = []

    async def never(request: PermissionRequest) -> PermissionAnswer:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    model = scripted({"tool_calls": [call("c1", "write", text="x")]}, {"text": "ok"})
    agent = make_agent(model, tools=[edit_tool(ran)], approval="ask", permission_timeout_s=0.05)
    session = await agent.new_session("/work")
    session.policy = StaticPolicy("ask", never)
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn" and ran == []
    assert of(seen, ev.PermissionResolved)[0].outcome == "cancelled"
    error = of(seen, ev.ToolFinished)[0].error
    assert error is not None and error.code == "permission_timeout"
    assert_well_formed(seen)


# -- reject and stop, read-only mode -----------------------------------------------------


async def test_reject_and_stop_ends_the_turn_without_running_the_rest() -> None:
    model = scripted(
        {"tool_calls": [call("a", "shell", text="one"), call("b", "shell", text="two")]},
        {"text": "the model must not be called again"},
    )
    agent = make_agent(model, tools=[text_tool("shell", kind="execute")], approval="ask")
    session = await agent.new_session("/tmp")
    asked: list[str] = []
    session.policy = ModePolicy(lambda: "default", asker(["reject_stop"], asked))
    outcome, events = await prompt(session)
    assert outcome.stop_reason == "rejected"
    assert asked == ["shell"]
    finished = {e.call_id: e for e in of(events, ev.ToolFinished)}
    assert finished["a"].error is not None and "stopped the turn" in finished["a"].error.message
    assert finished["b"].status == "cancelled"
    assert not of(events, ev.ToolStarted)
    assert len(of(events, ev.ModelRequestEvent)) == 1
    assert_well_formed(events)


async def test_read_only_mode_keeps_fetch_tools_off_the_network() -> None:
    model = scripted(
        {"tool_calls": [call("f", "web", text="https://example.com")]},
        {"text": "done"},
        {"tool_calls": [call("g", "web", text="https://example.com")]},
        {"text": "done"},
    )
    agent = make_agent(model, tools=[text_tool("web", kind="fetch")], approval="ask")
    session = await agent.new_session("/tmp")
    mode = ["read-only"]
    asked: list[str] = []
    session.policy = ModePolicy(lambda: mode[0], asker([], asked))
    _, events = await prompt(session)
    (finished,) = of(events, ev.ToolFinished)
    assert finished.error is not None and finished.error.code == "permission_denied"
    assert "network" in finished.error.message
    mode[0] = "default"
    _, events = await prompt(session)
    (finished,) = of(events, ev.ToolFinished)
    assert finished.status == "completed" and asked == []  # fetch still runs without asking


# -- deferred approvals and the client's resume ------------------------------------------


async def deferred_session(*rounds: dict[str, Any], ran: list[str]) -> Session:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args["text"])
        return ToolResult(content=(TextPart(text="written"),))

    tool = text_tool("write", kind="edit", handler=handler)
    session = await make_agent(scripted(*rounds), tools=[tool], approval="ask").new_session("/w")
    session.policy = StaticPolicy("ask", defer=True)
    return session


async def test_a_deferred_approval_is_an_interrupt_the_clients_resume_answers() -> None:
    ran: list[str] = []
    session = await deferred_session(
        {"tool_calls": [call("c1", "write", text="x")]}, {"text": "done"}, ran=ran
    )
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "interrupted" and ran == []
    (interrupt,) = of(seen, ev.RunFinished)[0].interrupts
    assert interrupt.id == "approval-c1" and interrupt.tool_call_id == "c1"
    assert interrupt.response_schema_json == APPROVAL_SCHEMA
    assert json.loads(APPROVAL_SCHEMA)["required"] == ["approved"]
    assert of(seen, ev.PermissionRequested)[0].call_id == "c1"
    outcome, seen = await answer(session, resume=(ResumeDecision(call_id="c1", approved=True),))
    assert outcome.stop_reason == "end_turn" and ran == ["x"]
    resolved = of(seen, ev.PermissionResolved)[0]
    assert resolved.outcome == "allow_once" and resolved.approval_key is None
    assert finished(seen)["c1"].status == "completed"


@pytest.mark.parametrize(
    ("decision", "stop_reason", "code"),
    [
        ({"approved": False}, "end_turn", "permission_denied"),
        ({"approved": False, "stop": True}, "rejected", None),
    ],
)
async def test_a_rejecting_resume_fails_the_call_or_stops_the_turn(
    decision: dict[str, Any], stop_reason: str, code: str | None
) -> None:
    ran: list[str] = []
    session = await deferred_session(
        {"tool_calls": [call("c1", "write", text="x")]}, {"text": "ok"}, ran=ran
    )
    await prompt(session)
    outcome, seen = await answer(session, resume=(ResumeDecision(call_id="c1", **decision),))
    assert outcome.stop_reason == stop_reason and ran == []
    result = finished(seen)["c1"]
    assert result.status != "completed"
    if code is not None:
        assert result.error is not None and result.error.code == code
    if decision.get("stop"):
        assert of(seen, ev.PermissionResolved)[0].option_id == "reject_stop"
    assert_every_call_finished_once(session)


async def test_an_always_resume_is_kept_and_the_next_such_call_is_not_deferred() -> None:
    ran: list[str] = []
    session = await deferred_session(
        {"tool_calls": [call("c1", "write", text="x")]},
        {"tool_calls": [call("c2", "write", text="y")]},
        {"text": "ok"},
        ran=ran,
    )
    await prompt(session)
    decision = ResumeDecision(call_id="c1", approved=True, always=True)
    outcome, seen = await answer(session, resume=(decision,))
    assert outcome.stop_reason == "end_turn" and ran == ["x", "y"]
    assert [e.outcome for e in of(seen, ev.PermissionResolved)] == ["allow_always"]
    assert of(seen, ev.PermissionResolved)[0].approval_key == "write"


async def test_a_withdrawn_permission_request_does_not_run_the_call() -> None:
    ran: list[str] = []

    async def withdraw(request: PermissionRequest) -> PermissionAnswer:
        return PermissionAnswer(outcome="cancelled")

    session = await deferred_session(
        {"tool_calls": [call("c1", "write", text="x")]}, {"text": "ok"}, ran=ran
    )
    session.policy = StaticPolicy("ask", withdraw)
    outcome, seen = await prompt(session)
    assert outcome.stop_reason == "end_turn" and ran == []
    result = finished(seen)["c1"]
    assert result.error is not None and result.error.code == "permission_denied"
    assert "withdrawn" in result.error.message
