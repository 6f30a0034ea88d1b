"""The transcript recorder keeps wire order even when an answer is observed before its request."""

from __future__ import annotations

import pytest
from acp.connection import StreamDirection, StreamEvent

from steerable_bridge.conformance import TranscriptRecorder, check_acp_transcript
from steerable_bridge.conformance.transcript import as_transcript


def test_an_early_answer_is_recorded_after_its_request() -> None:
    recorder = TranscriptRecorder()
    answer = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    recorder(StreamEvent(StreamDirection.INCOMING, answer))
    assert recorder.messages == []
    recorder(StreamEvent(StreamDirection.OUTGOING, request))
    assert [(m.sender, m.message) for m in recorder.transcript()] == [
        ("client", request),
        ("agent", answer),
    ]
    assert check_acp_transcript(recorder.transcript()) == []


def test_an_answer_to_nothing_is_kept_and_reported() -> None:
    recorder = TranscriptRecorder()
    recorder(StreamEvent(StreamDirection.INCOMING, {"jsonrpc": "2.0", "id": 7, "result": {}}))
    findings = check_acp_transcript(recorder.transcript())
    assert [f.rule_id for f in findings] == ["acp.response-unmatched"]


def test_malformed_entries_are_refused_with_the_expected_shape() -> None:
    with pytest.raises(ValueError, match="sender"):
        as_transcript([{"from": "client", "message": {}}])
