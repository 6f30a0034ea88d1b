"""Prompt-cache counters on both wires: ACP `usage_update` `_meta`, AG-UI `RUN_FINISHED`
usage, and a signed reasoning block's seal in AG-UI metadata — each decoded back exactly."""

from __future__ import annotations

from typing import Any

from steerable_bridge.conformance.decode_agui import decode_event
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import Usage
from steerable_bridge.transports.acp.renderer import AcpRenderer
from steerable_bridge.transports.agui.renderer import AguiRenderer


def make(cls: type[Any], seq: int, **fields: Any) -> Any:
    return cls(session_id="t", run_id="r", seq=seq, ts=1_700_000_000_000, **fields)


def test_acp_usage_update_carries_cache_read_and_creation_tokens() -> None:
    event = make(
        ev.UsageUpdated,
        1,
        used=1300,
        size=200_000,
        cache_read_tokens=1200,
        cache_creation_tokens=40,
    )
    (update,) = AcpRenderer(routes=["anthropic:m"]).render(event)
    assert (update.used, update.size) == (1300, 200_000)
    meta = update.field_meta["steerable"]
    assert (meta["cache_read_tokens"], meta["cache_creation_tokens"]) == (1200, 40)


def test_agui_run_usage_has_cache_write_and_read_and_reasoning_seals_decode() -> None:
    renderer = AguiRenderer(thread_id="t", run_id="r", messages=lambda: [])
    usage = Usage(
        prompt_tokens=1300, completion_tokens=5, cached_tokens=1200, cache_creation_tokens=40
    )
    events = [
        make(ev.RunStarted, 0, model="anthropic:m"),
        make(ev.ReasoningStart, 1, message_id="think"),
        make(ev.ReasoningEnd, 2, message_id="think", redacted_data="ENC=="),
        make(ev.RunFinished, 3, stop_reason="end_turn", usage=usage),
    ]
    wire = [message for event in events for message in renderer.render(event)]
    finished = next(m for m in wire if m.type == "RUN_FINISHED")
    (token_usage,) = finished.usage
    assert token_usage.cached_input_tokens == 1200
    assert token_usage.cache_write_input_tokens == 40
    decoded = [decode_event(m, "t") for m in wire]
    assert [e for e in decoded if e is not None] == events
