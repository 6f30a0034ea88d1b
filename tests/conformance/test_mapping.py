"""The mapping table covers every kind on both wires, agrees with the renderers, and the
committed docs/mapping.md is the table as generated."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from steerable_bridge.conformance.agui_wire import render_agui_stream
from steerable_bridge.conformance.grammar import sessions
from steerable_bridge.conformance.mapping import MAPPING, acp_shown, markdown, missing_rows, row
from steerable_bridge.runtime.events import KINDS, LoopEvent
from steerable_bridge.transports.acp.renderer import AcpRenderer
from tests.lanes import examples

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mapping.md"


def test_every_kind_has_exactly_one_row() -> None:
    assert missing_rows() == []
    assert sorted(m.kind for m in MAPPING) == sorted(KINDS)
    for m in MAPPING:
        assert m.acp and m.agui, f"{m.kind} lacks a rendering on one side"


def test_docs_mapping_md_is_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == markdown(), (
        "docs/mapping.md is stale; regenerate it with"
        " `uv run steerable-bridge conformance --markdown > docs/mapping.md`"
    )


@pytest.mark.parametrize("kind", ["text_delta", "tool_call_end", "model_request", "run_finished"])
def test_rows_are_looked_up_by_kind(kind: str) -> None:
    assert row(kind).kind == kind


@settings(max_examples=examples(60), deadline=None, database=None)
@given(sessions())
def test_the_table_says_what_the_renderers_do(events: list[LoopEvent]) -> None:
    acp = AcpRenderer()
    for event in events:
        updates = acp.render(event)
        form = row(event.kind).acp_form
        if form == "update":  # config_changed and usage_updated show only some events
            shown = acp_shown(event)
            assert bool(updates) == shown, f"{event.kind}: shown={shown}, rendered {updates}"
        else:
            assert not updates, f"{event.kind} should not render as a session/update"
    for raw in render_agui_stream(events):
        steerable = (raw.get("metadata") or {}).get("steerable") or {}
        if steerable.get("derived"):
            continue
        if raw["type"] == "CUSTOM":
            continue  # every kind may go as CUSTOM when its native form is impossible
        mapped = row(steerable["kind"]).agui
        assert raw["type"] in mapped, f"{steerable['kind']} went as {raw['type']}, not {mapped}"
