"""The ACP mapping table has one row per taxonomy kind, every row it says renders has a
renderer method, and the renderer sends only the `sessionUpdate` variants its row names."""

from __future__ import annotations

from hypothesis import given, settings

from steerable_bridge.conformance.grammar import sessions
from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.acp.mapping import EVENT_CHANNEL, TABLE, by_kind
from steerable_bridge.transports.acp.renderer import _RENDER, AcpRenderer
from tests.lanes import examples


def test_every_taxonomy_kind_has_exactly_one_row() -> None:
    assert [row.event for row in TABLE] == list(ev.EVENT_TYPES)
    for kind in ev.KINDS:
        found = by_kind(kind)
        assert found is not None and found.kind == kind


def test_every_rendering_row_names_a_renderer_method() -> None:
    for row in TABLE:
        if row.render is None:
            assert not row.updates, f"{row.kind} names updates but no method renders them"
            continue
        method = getattr(AcpRenderer, row.render, None)
        assert callable(method), f"{row.kind}: AcpRenderer has no method {row.render}"
        assert row.updates, f"{row.kind}: {row.render} renders no sessionUpdate variant"
        assert _RENDER[row.event] is method


def test_the_dispatch_holds_exactly_the_rows_that_render() -> None:
    assert set(_RENDER) == {row.event for row in TABLE if row.render is not None}


def test_the_not_rendered_kinds_are_the_event_channel_and_the_prompt_turn() -> None:
    not_rendered = {row.kind for row in TABLE if row.render is None}
    for kind in not_rendered:
        found = by_kind(kind)
        assert found is not None and found.form != "update", kind
    channel = {row.kind for row in TABLE if row.form == "event channel"}
    assert channel <= not_rendered
    assert all(row.method == EVENT_CHANNEL for row in TABLE if row.form == "event channel")


def _renderers() -> list[AcpRenderer]:
    return [
        AcpRenderer(routes=("a:m",), echo_user=echo, notices=flag, compaction=flag)
        for echo in (False, True)
        for flag in (False, True)
    ]


@settings(max_examples=examples(40), deadline=None, database=None)
@given(sessions())
def test_the_renderer_sends_only_the_variants_its_row_names(events: list[ev.LoopEvent]) -> None:
    renderers = _renderers()
    for event in events:
        row = by_kind(event.kind)
        assert row is not None
        for renderer in renderers:
            sent = {update.session_update for update in renderer.render(event)}
            assert sent <= set(row.updates), f"{event.kind} sent {sent}, not {row.updates}"


def test_a_notice_is_sent_only_as_the_variants_its_row_names() -> None:
    notice = ev.Notice(
        session_id="s", run_id="r", seq=3, ts=1, severity="warning", title="No sandbox"
    )
    row = by_kind("notice")
    assert row is not None
    sent = {u.session_update for renderer in _renderers() for u in renderer.render(notice)}
    assert sent == set(row.updates)
