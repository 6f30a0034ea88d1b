"""The last line on the AG-UI wire: an event whose text UTF-8 cannot encode (a lone UTF-16
surrogate some adapter let through) is sent with U+FFFD in its place, never dropped — on the
byte-template path and through the SDK models alike."""

from __future__ import annotations

import json
import logging

import pytest
from ag_ui.core import MessagesSnapshotEvent, UserMessage

from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.wire import SseEncoder

START = ev.RunStarted(session_id="t", run_id="r", seq=0, ts=1, model="m")


def _encoder() -> SseEncoder:
    encoder = SseEncoder(AguiRenderer(thread_id="t", run_id="x", messages=lambda: []))
    encoder.encode(START)
    return encoder


def _frames(data: bytes) -> list[dict[str, object]]:
    text = data.decode("utf-8")  # strict: raises on anything unencodable that slipped out
    blocks = [b.split("\n", 1)[1] if b.startswith("id: ") else b for b in text.split("\n\n")]
    return [json.loads(b[6:]) for b in blocks if b.startswith("data: ")]


@pytest.mark.parametrize(
    "event",
    [
        ev.TextDelta(session_id="t", run_id="r", seq=1, ts=2, message_id="m", delta="a\ud800"),
        ev.ToolCallDelta(session_id="t", run_id="r", seq=1, ts=2, call_id="c", delta="\udfff"),
        ev.HookAction(
            session_id="t", run_id="r", seq=1, ts=2, hook="h", action="a", detail="\ud83d"
        ),
    ],
    ids=["text (byte template)", "tool args (byte template)", "custom kind"],
)
def test_an_unencodable_event_is_sent_repaired(
    event: ev.LoopEvent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    (frame,) = _frames(_encoder().encode(event))
    assert "\ufffd" in json.dumps(frame, ensure_ascii=False)
    assert "lone UTF-16 surrogate" in caplog.text


def test_sdk_models_holding_a_lone_surrogate_are_sent_repaired() -> None:
    snapshot = MessagesSnapshotEvent(messages=[UserMessage(id="u", content="half \ud83d")])
    (frame,) = _frames(_encoder().encode_models([snapshot]))
    assert frame["messages"] == [{"id": "u", "role": "user", "content": "half \ufffd"}]
