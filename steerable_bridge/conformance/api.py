"""The public checking API other projects' tests call: check (returns) or assert (raises).

`check_agui_stream(events)` and `check_acp_transcript(messages)` return every `Finding`;
`assert_valid_agui_stream` and `assert_valid_acp_transcript` raise `ConformanceError` listing
every finding with its rule id, and return nothing when the stream is valid. Events are AG-UI
events as received (JSON objects, or SDK models); a transcript is a sequence of
`WireMessage`s or `{"sender": "client"|"agent", "message": {...}}` dicts in wire order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ag_ui.core import RunAgentInput

from steerable_bridge.conformance.acp_rules import check_acp_transcript
from steerable_bridge.conformance.agui_rules import check_agui_stream
from steerable_bridge.conformance.findings import ConformanceError

__all__ = [
    "assert_valid_acp_transcript",
    "assert_valid_agui_stream",
    "check_acp_transcript",
    "check_agui_stream",
]


def assert_valid_agui_stream(
    events: Sequence[object], *, run_input: RunAgentInput | Mapping[str, Any] | None = None
) -> None:
    """Raise `ConformanceError` with every finding when the AG-UI stream breaks a rule."""
    findings = check_agui_stream(events, run_input=run_input)
    if findings:
        raise ConformanceError("the AG-UI stream", findings)


def assert_valid_acp_transcript(messages: Iterable[object]) -> None:
    """Raise `ConformanceError` with every finding when the ACP transcript breaks a rule."""
    findings = check_acp_transcript(messages)
    if findings:
        raise ConformanceError("the ACP transcript", findings)
