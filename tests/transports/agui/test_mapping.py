"""The AG-UI mapping table agrees with its readers: every native row has a renderer handler,
every other taxonomy kind (a CUSTOM carrier) has a byte fast-path template, and each kind
has one form."""

from __future__ import annotations

from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.agui.mapping import CUSTOM_NOTES, NATIVE, TABLE, by_carrier
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.wire import _FAST


def test_every_native_row_has_a_renderer_handler() -> None:
    renderer = AguiRenderer(thread_id="t", run_id="r")
    for row in TABLE:
        handler = renderer._handlers.get(row.event)
        assert handler is not None, f"{row.kind} has a row but no AguiRenderer handler"
        if row.render is not None:
            assert handler is row.render, f"{row.kind} is not rendered by {row.render}"
    assert set(renderer._handlers) == NATIVE


def test_every_custom_carrier_has_a_fast_template() -> None:
    custom = [cls for cls in ev.EVENT_TYPES if cls not in NATIVE]
    for cls in custom:
        assert cls in _FAST, f"{cls.__name__} travels as CUSTOM but wire._FAST has no template"


def test_every_taxonomy_kind_is_native_or_custom_once() -> None:
    kinds = [row.event for row in TABLE]
    assert len(kinds) == len(set(kinds)), "a kind has two AG-UI rows"
    assert set(kinds) <= set(ev.EVENT_TYPES)
    custom_kinds = {str(cls.__dataclass_fields__["kind"].default) for cls in ev.EVENT_TYPES} - {
        row.kind for row in TABLE
    }
    assert set(CUSTOM_NOTES) <= custom_kinds, "a CUSTOM note names a native kind"


def test_each_carrier_names_one_row_and_the_fields_are_its_own() -> None:
    for row in TABLE:
        assert by_carrier(row.types[0]) is row, f"{row.types[0]} carries two kinds"
        names = set(row.event.__dataclass_fields__)
        for field in (*row.fields.values(), *row.canonical.values()):
            assert field in names, f"{row.kind} has no field {field}"
