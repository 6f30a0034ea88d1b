"""The conformance suite: the mapping table, both decoders, the validity rules, the scenarios.

Other projects' tests import the checks from here:

    from steerable_bridge.conformance import assert_valid_agui_stream
    assert_valid_agui_stream(events)  # raises ConformanceError listing every broken rule
"""

from steerable_bridge.conformance.api import (
    assert_valid_acp_transcript,
    assert_valid_agui_stream,
    check_acp_transcript,
    check_agui_stream,
)
from steerable_bridge.conformance.findings import ConformanceError, Finding, Rule
from steerable_bridge.conformance.transcript import TranscriptRecorder, WireMessage

__all__ = [
    "ConformanceError",
    "Finding",
    "Rule",
    "TranscriptRecorder",
    "WireMessage",
    "assert_valid_acp_transcript",
    "assert_valid_agui_stream",
    "check_acp_transcript",
    "check_agui_stream",
]
