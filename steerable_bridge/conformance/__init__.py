"""The conformance suite: the mapping table, both decoders, the validity rules, the scenarios.

Other projects' tests import the checks from here:

    from steerable_bridge.conformance import assert_valid_agui_stream
    assert_valid_agui_stream(events)  # raises ConformanceError listing every broken rule

and the decoders that turn either wire back into LoopEvents (`decode_agui`, `decode_acp`).
"""

from steerable_bridge.conformance.api import (
    assert_valid_acp_transcript,
    assert_valid_agui_stream,
    check_acp_transcript,
    check_agui_stream,
)
from steerable_bridge.conformance.decode_acp import DecodeError, decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.findings import ConformanceError, Finding, Rule
from steerable_bridge.conformance.transcript import TranscriptRecorder, WireMessage

__all__ = [
    "ConformanceError",
    "DecodeError",
    "Finding",
    "Rule",
    "TranscriptRecorder",
    "WireMessage",
    "assert_valid_acp_transcript",
    "assert_valid_agui_stream",
    "check_acp_transcript",
    "check_agui_stream",
    "decode_acp",
    "decode_agui",
]
