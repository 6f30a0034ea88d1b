"""Deliberately broken renderers are caught, each with the rule id that names its fault."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from ag_ui.core import BaseEvent, TextMessageEndEvent, ToolCallResultEvent

from steerable_bridge.conformance import check_acp_transcript, check_agui_stream
from steerable_bridge.conformance.acp_wire import render_acp_transcript
from steerable_bridge.conformance.agui_wire import render_agui_stream
from steerable_bridge.conformance.decode_acp import DecodeError
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.scenarios import load_scenarios, run_in_process
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent, StopReason
from steerable_bridge.transports.acp.renderer import AcpRenderer, stop_reason
from steerable_bridge.transports.agui.renderer import AguiRenderer


def events_of(name: str) -> list[LoopEvent]:
    (scenario,) = load_scenarios([name])
    return anyio.run(run_in_process, scenario)


class DropsTextEnd(AguiRenderer):
    def render(self, event: LoopEvent) -> list[BaseEvent]:
        return [e for e in super().render(event) if not isinstance(e, TextMessageEndEvent)]


class SharesResultIds(AguiRenderer):
    def render(self, event: LoopEvent) -> list[BaseEvent]:
        out = super().render(event)
        for item in out:
            if isinstance(item, ToolCallResultEvent):
                item.message_id = "result"
        return out


class DropsANewMessage(AguiRenderer):
    """Sends a request by reference without the first message it adds."""

    def request_value(self, event: ev.ModelRequestEvent) -> str:
        value = json.loads(super().request_value(event))
        if "request_ref" in value and value["request"]["messages"]:
            del value["request"]["messages"][0]
        return json.dumps(value)


class DropsToolCall(AcpRenderer):
    def render(self, event: LoopEvent) -> list[Any]:
        return [u for u in super().render(event) if u.session_update != "tool_call"]


def ends_turn_after_cancel(reason: StopReason) -> str:
    return "end_turn" if reason == "cancelled" else stop_reason(reason)


def rule_ids(findings: Sequence[Any]) -> set[str]:
    return {f.rule_id for f in findings}


def test_the_real_renderers_are_clean_on_these_scenarios() -> None:
    for name in ("plain_chat", "parallel_tools", "one_tool", "cancel_mid_stream"):
        events = events_of(name)
        assert check_agui_stream(render_agui_stream(events)) == []
        assert check_acp_transcript(render_acp_transcript(events)) == []


def test_dropping_text_message_end_is_caught() -> None:
    events = events_of("plain_chat")
    stream = render_agui_stream(events, renderer=DropsTextEnd)
    assert "agui.open-at-finish" in rule_ids(check_agui_stream(stream))
    assert decode_agui(stream) != [e for e in events if e.run_id]


def test_shared_result_message_ids_are_caught() -> None:
    stream = render_agui_stream(events_of("parallel_tools"), renderer=SharesResultIds)
    assert "agui.result-id-reused" in rule_ids(check_agui_stream(stream))


def test_a_request_by_reference_that_lost_a_message_is_caught() -> None:
    stream = render_agui_stream(events_of("parallel_tools"), renderer=DropsANewMessage)
    assert "agui.model-request" in rule_ids(check_agui_stream(stream))
    with pytest.raises(DecodeError, match="make no"):
        decode_agui(stream)


def test_end_turn_after_a_cancel_is_caught() -> None:
    events = events_of("cancel_mid_stream")
    transcript = render_acp_transcript(events, stop=ends_turn_after_cancel)
    findings = check_acp_transcript(transcript)
    assert rule_ids(findings) == {"acp.cancel-stop-reason"}
    assert "cancelled" in findings[0].message


def test_an_update_for_a_call_never_announced_is_caught() -> None:
    transcript = render_acp_transcript(events_of("one_tool"), renderer=DropsToolCall)
    assert rule_ids(check_acp_transcript(transcript)) == {"acp.tool-call-order"}


@pytest.mark.parametrize("model", [DropsTextEnd, SharesResultIds])
def test_the_doubles_still_produce_sdk_valid_events(model: type[AguiRenderer]) -> None:
    stream = render_agui_stream(events_of("parallel_tools"), renderer=model)
    assert "agui.schema" not in rule_ids(check_agui_stream(stream))
