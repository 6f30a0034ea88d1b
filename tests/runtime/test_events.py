"""The LoopEvent taxonomy (`runtime/events.py`): every variant is a frozen, slotted dataclass
with a unique literal `kind` and the four common fields, no untyped payload; the `LoopEvent`
union, `EVENT_TYPES` and `KINDS` list every variant the module defines, in one order; a
`Compaction` says what it folded and what it saved in its `headline`. Their JSON form is
pinned in `test_codec.py`."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev

from .strategies import for_dataclass

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=ev.KINDS)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_every_variant_is_frozen_and_slotted(cls: type, data: st.DataObject) -> None:
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert "__slots__" in cls.__dict__
    event = data.draw(for_dataclass(cls))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 99
    with pytest.raises((AttributeError, TypeError)):
        event.extra = 1


def test_kinds_are_unique_and_every_variant_carries_the_common_fields() -> None:
    assert len(set(ev.KINDS)) == len(ev.KINDS) == len(ev.EVENT_TYPES)
    for cls in ev.EVENT_TYPES:
        names = {f.name for f in dataclasses.fields(cls)}
        assert {"session_id", "run_id", "seq", "ts", "kind"} <= names
        assert "data" not in names  # no untyped payload bags


def test_the_headline_says_what_was_folded_and_what_it_saved() -> None:
    def fold(**fields: object) -> ev.Compaction:
        base: dict[str, object] = {"summary": "s", "through_seq": 9, "pre_tokens": 6120}
        return ev.Compaction(session_id="s", run_id="r", seq=10, ts=1, **(base | fields))  # type: ignore[arg-type]

    assert fold(turns=3, post_tokens=1450).headline == "Compacted 3 turns: 6,120 → 1,450 tokens."
    assert fold(turns=1, post_tokens=9).headline == "Compacted 1 turn: 6,120 → 9 tokens."
    pressure = fold(trigger="pressure", post_tokens=900, fallback=True, notice="Breaker open.")
    assert pressure.headline == (
        "The context window was nearly full: compacted the conversation so far: 6,120 → 900"
        " tokens. The summary is a digest of those turns (the model could not write one)."
        "\n\nBreaker open."
    )
    micro = fold(trigger="micro", scope="tool_results", post_tokens=3000)
    assert micro.headline == "Folded old tool results: 6,120 → 3,000 tokens."
    overflow = fold(trigger="overflow", turns=2, post_tokens=10)
    assert overflow.headline == (
        "The model's context window overflowed: compacted 2 turns: 6,120 → 10 tokens."
    )


def test_the_union_lists_every_variant_the_module_defines() -> None:
    defined = {
        cls
        for _, cls in inspect.getmembers(ev, inspect.isclass)
        if issubclass(cls, ev.EventBase) and cls is not ev.EventBase
    }
    assert set(ev.EVENT_TYPES) == defined
    assert typing.get_args(ev.LoopEvent) == ev.EVENT_TYPES
    assert tuple(cls.__dataclass_fields__["kind"].default for cls in ev.EVENT_TYPES) == ev.KINDS


def test_the_common_fields_come_first_and_the_rest_are_keyword_only() -> None:
    for cls in ev.EVENT_TYPES:
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[:4] == ["session_id", "run_id", "seq", "ts"], cls.__name__
        with pytest.raises(TypeError):
            cls("s", "r", 0, 0)  # positional construction is refused
