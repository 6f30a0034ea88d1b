"""The decoders refuse what steerable-bridge did not render, naming the message."""

from __future__ import annotations

import pytest

from steerable_bridge.conformance.decode_acp import DecodeError, decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui


def test_agui_events_without_metadata_are_not_ours() -> None:
    stream = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
    ]
    with pytest.raises(DecodeError, match=r"event 0 \(RUN_STARTED\).*metadata.steerable"):
        decode_agui(stream)


def test_foreign_custom_events_and_derived_events_carry_nothing() -> None:
    stream = [
        {"type": "CUSTOM", "name": "someone.else", "value": 1},
        {"type": "MESSAGES_SNAPSHOT", "messages": [], "metadata": {"steerable": {"derived": True}}},
    ]
    assert decode_agui(stream) == []


def test_acp_updates_without_meta_are_not_ours() -> None:
    update = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hi"},
    }
    transcript = [
        {
            "sender": "agent",
            "message": {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s", "update": update},
            },
        }
    ]
    with pytest.raises(DecodeError, match=r"message 0 \(session/update\).*_meta.steerable"):
        decode_acp(transcript)
