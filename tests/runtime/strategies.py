"""Hypothesis strategies for every LoopEvent variant, built from the dataclasses' own type
hints, so a field added to the taxonomy is generated (and round-tripped) automatically."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Literal, Union

from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime import values
from steerable_bridge.runtime.ports import model as model_values

_NAMESPACE: dict[str, Any] = {**vars(values), **vars(model_values), **vars(ev)}

_text = st.text(max_size=12)
_ints = st.integers(min_value=-(2**53), max_value=2**53)


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for one resolved type hint of the taxonomy."""
    origin = typing.get_origin(tp)
    if tp is str:
        return _text
    if tp is bool:
        return st.booleans()
    if tp is int:
        return _ints
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return st.one_of([for_type(arg) for arg in typing.get_args(tp)])
    if origin is tuple:
        item, *rest = typing.get_args(tp)
        assert rest == [Ellipsis], f"only tuple[X, ...] is supported, not {tp}"
        return st.lists(for_type(item), max_size=3).map(tuple)
    if dataclasses.is_dataclass(tp):
        return for_dataclass(tp)
    raise TypeError(f"no strategy for {tp!r}; extend tests/runtime/strategies.py")


@cache
def for_dataclass(cls: type) -> st.SearchStrategy[Any]:
    """Every field of `cls` generated (defaults included); `kind` / `type` kept fixed."""
    hints = typing.get_type_hints(cls, globalns=_NAMESPACE)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in dataclasses.fields(cls):
        if field.name in ("kind", "type"):
            continue
        fields[field.name] = for_type(hints[field.name])
    return st.builds(cls, **fields)


def events() -> st.SearchStrategy[ev.LoopEvent]:
    return st.one_of([for_dataclass(cls) for cls in ev.EVENT_TYPES])
