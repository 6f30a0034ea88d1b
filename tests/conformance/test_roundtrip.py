"""decode(render(x)) == x on generated sessions, and every rendering keeps every rule.

AG-UI must give back every event exactly. ACP must give back every event exactly through
the `_steerable/event` channel; without it, exactly every kind the mapping table marks
ACP-exact, and the meaning of the kinds an editor sees through requests and responses.
"""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.conformance import check_acp_transcript, check_agui_stream
from steerable_bridge.conformance.acp_wire import render_acp_transcript
from steerable_bridge.conformance.agui_wire import render_agui_stream
from steerable_bridge.conformance.decode_acp import decode_acp
from steerable_bridge.conformance.decode_agui import decode_agui
from steerable_bridge.conformance.grammar import sessions
from steerable_bridge.conformance.mapping import acp_exact, acp_shown, row
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.acp.renderer import AcpRenderer
from tests.lanes import examples

EXAMPLES = examples(400)


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(sessions())
def test_agui_rendering_is_valid_and_decodes_exactly(events: list[LoopEvent]) -> None:
    stream = render_agui_stream(events)
    assert check_agui_stream(stream) == []
    assert decode_agui(stream) == events


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(sessions())
def test_acp_with_the_event_channel_decodes_exactly(events: list[LoopEvent]) -> None:
    transcript = render_acp_transcript(events, channel=True)
    assert check_acp_transcript(transcript) == []
    assert decode_acp(transcript) == events


def _meaning(event: LoopEvent) -> tuple[object, ...]:
    names = row(event.kind).meaning
    return (event.kind, event.run_id, *(getattr(event, name) for name in names))


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(sessions(), st.booleans(), st.booleans())
def test_acp_without_the_channel_is_exact_on_what_an_editor_shows(
    events: list[LoopEvent], channel_present: bool, v125: bool
) -> None:
    # v125: the client advertised session.notices / session.compaction (their own updates)
    renderer = functools.partial(AcpRenderer, notices=v125, compaction=v125)
    transcript = render_acp_transcript(events, channel=channel_present, renderer=renderer)
    assert check_acp_transcript(transcript) == []
    decoded = decode_acp(transcript, channel=False)
    exact = functools.partial(acp_exact, compaction=v125)
    assert [e for e in decoded if exact(e)] == [e for e in events if exact(e)]
    shown = [e for e in events if acp_shown(e, compaction=v125) and not exact(e)]
    assert [_meaning(e) for e in decoded if not exact(e)] == [_meaning(e) for e in shown]
