"""RunAgentInput → TurnInput: resent messages are skipped, tool messages answer open calls,
frontend tools and resume decisions are mapped, mistakes are InputErrors naming the fix."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.turns.turn import ClientToolResult, ResumeDecision
from steerable_bridge.runtime.values import ImagePart, ResourcePart, TextPart
from steerable_bridge.transports.agui.inputs import (
    InputError,
    content_parts,
    snapshot_requested,
    speaks_1_0,
    steer_requested,
    to_turn,
)

OPEN = {
    "c1": ev.ToolCallEnd(
        session_id="t", run_id="r", seq=1, ts=1, call_id="c1", name="w", arguments_json="{}"
    )
}


def _input(messages: list[dict[str, Any]], **extra: Any) -> RunAgentInput:
    return RunAgentInput.model_validate(
        {"threadId": "t", "runId": "r", "messages": messages, **extra}
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, False),  # 0.0.x clients (CopilotKit's 0.0.59) declare nothing
        ({"protocolVersion": "1.0"}, True),  # HttpAgent from @ag-ui/client 1.0
        ({"protocolVersion": "2.1"}, True),
        ({"protocolVersion": "0.0.59"}, False),
        ({"protocolVersion": "soon"}, False),
    ],
)
def test_the_client_version_comes_from_protocol_version(
    extra: dict[str, Any], expected: bool
) -> None:
    assert speaks_1_0(_input([], **extra)) is expected


def test_known_messages_are_skipped_and_earlier_new_ones_kept_in_order() -> None:
    run = _input(
        [
            {"id": "u1", "role": "user", "content": "old"},
            {"id": "u2", "role": "user", "content": "new one"},
            {"id": "a1", "role": "assistant", "content": "ignored"},
            {"id": "u3", "role": "user", "content": "newest"},
        ]
    )
    parsed = to_turn(run, {"u1"}, {})
    assert parsed.turn.message_id == "u3"
    assert parsed.turn.content == (TextPart(text="newest"),)
    assert parsed.earlier == (("u2", (TextPart(text="new one"),)),)
    assert parsed.new_ids == {"u2", "a1", "u3"}
    assert to_turn(run, {"u1", "u2", "a1", "u3"}, {}).turn.content == ()


def test_tool_messages_answer_open_calls_only() -> None:
    run = _input(
        [
            {"id": "m1", "role": "tool", "toolCallId": "c1", "content": "done"},
            {"id": "m2", "role": "tool", "toolCallId": "stale", "content": "late"},
            {"id": "m3", "role": "tool", "toolCallId": "c1", "content": "", "error": "it broke"},
        ]
    )
    results = to_turn(run, set(), OPEN).turn.tool_results
    assert results == (
        ClientToolResult(call_id="c1", content=(TextPart(text="done"),)),
        ClientToolResult(call_id="c1", content=(TextPart(text="it broke"),), is_error=True),
    )


def test_frontend_tools_state_and_steering() -> None:
    run = _input(
        [],
        tools=[{"name": "show", "description": "Show it", "parameters": {"type": "object"}}],
        state={"b": 1, "a": [1, 2]},
        forwardedProps={"steerable": {"steer": True}},
    )
    turn = to_turn(run, set(), {}).turn
    (tool,) = turn.client_tools
    assert (tool.name, tool.executor, dict(tool.parameters)) == (
        "show",
        "frontend",
        {"type": "object"},
    )
    assert turn.state_json == '{"b":1,"a":[1,2]}'
    assert steer_requested(run) and not steer_requested(_input([]))
    assert to_turn(_input([]), set(), {}).turn.state_json is None


def test_resume_maps_interrupts_to_decisions() -> None:
    run = _input(
        [],
        resume=[
            {"interruptId": "approval-c1", "status": "resolved", "payload": {"approved": True}},
        ],
    )
    assert to_turn(run, set(), OPEN).turn.resume == (ResumeDecision(call_id="c1", approved=True),)
    cancelled = _input([], resume=[{"interruptId": "approval-c1", "status": "cancelled"}])
    assert to_turn(cancelled, set(), OPEN).turn.resume == (
        ResumeDecision(call_id="c1", approved=False),
    )


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (
            {"interruptId": "approval-zz", "status": "resolved", "payload": {"approved": True}},
            "unknown_interrupt",
        ),
        ({"interruptId": "other", "status": "resolved"}, "unknown_interrupt"),
        (
            {"interruptId": "approval-c1", "status": "resolved", "payload": {"ok": 1}},
            "invalid_resume",
        ),
    ],
)
def test_bad_resume_entries_are_input_errors(entry: dict[str, Any], code: str) -> None:
    with pytest.raises(InputError) as caught:
        to_turn(_input([], resume=[entry]), set(), OPEN)
    assert caught.value.code == code


def test_content_parts() -> None:
    parts = content_parts(
        _input(
            [
                {
                    "id": "u",
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {
                            "type": "image",
                            "source": {"type": "data", "value": "AAA", "mimeType": "image/png"},
                        },
                        {"type": "document", "source": {"type": "url", "value": "https://x/y.pdf"}},
                    ],
                }
            ]
        )
        .messages[0]
        .content  # type: ignore[union-attr]
    )
    assert parts == (
        TextPart(text="look"),
        ImagePart(data="AAA", mime_type="image/png"),
        ResourcePart(uri="https://x/y.pdf"),
    )


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (None, True),
        ({"steerable": {}}, True),
        ({"steerable": {"snapshot": True}}, True),
        ({"steerable": {"snapshot": False}}, False),
        ({"other": {"snapshot": False}}, True),  # only our own namespace counts
    ],
)
def test_snapshot_is_sent_unless_forwarded_props_say_false(
    props: dict[str, Any] | None, expected: bool
) -> None:
    extra = {} if props is None else {"forwardedProps": props}
    assert snapshot_requested(_input([], **extra)) is expected


@pytest.mark.parametrize("value", ["false", 0, 1, None, [], {}])
def test_a_snapshot_value_that_is_not_a_boolean_is_an_input_error(value: Any) -> None:
    with pytest.raises(InputError) as caught:
        snapshot_requested(_input([], forwardedProps={"steerable": {"snapshot": value}}))
    assert caught.value.code == "invalid_input"
    assert "forwardedProps.steerable.snapshot must be true or false" in caught.value.message
