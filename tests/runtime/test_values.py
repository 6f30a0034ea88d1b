"""Runtime values (`runtime/values.py`): `canonical_json` is the one compact text form of a
JSON value (key order kept, non-ASCII as is, NaN and Infinity refused); `Usage` adds field by
field and totals prompt plus completion; `Message.text` joins only its text parts; every
value is frozen and keyword-only, so nothing handed on can change under its receiver."""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import values
from steerable_bridge.runtime.values import (
    DiffContent,
    ImagePart,
    Message,
    TextPart,
    Usage,
    canonical_json,
)
from tests.lanes import examples


def test_canonical_json_is_compact_keeps_key_order_and_non_ascii() -> None:
    assert canonical_json({"b": 1, "a": [1, 2, {"é": "ü"}], "c": None}) == (
        '{"b":1,"a":[1,2,{"é":"ü"}],"c":null}'
    )
    assert canonical_json("line\nbreak") == '"line\\nbreak"'


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {"x": float("-inf")}])
def test_canonical_json_refuses_what_no_strict_parser_reads(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json(value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(_JSON)
def test_canonical_json_is_a_fixed_point_of_parsing(value: Any) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text


def test_usage_adds_every_field_and_totals_prompt_and_completion() -> None:
    a = Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=4, reasoning_tokens=2)
    b = Usage(prompt_tokens=1, completion_tokens=2, cached_tokens=3, cache_creation_tokens=5)
    assert a + b == Usage(
        prompt_tokens=11,
        completion_tokens=7,
        cached_tokens=7,
        reasoning_tokens=2,
        cache_creation_tokens=5,
    )
    assert (a + b).total_tokens == 18
    assert a + Usage() == a and Usage().total_tokens == 0


def test_message_text_joins_only_its_text_parts() -> None:
    message = Message(
        id="m1",
        role="tool",
        content=(
            TextPart(text="one "),
            ImagePart(data="aGk=", mime_type="image/png"),
            DiffContent(path="a.py", old_text=None, new_text="x"),
            TextPart(text="two"),
        ),
    )
    assert message.text == "one two"
    assert Message(id="m2", role="user").text == ""


def _value_classes() -> list[type]:
    return [
        cls
        for _, cls in inspect.getmembers(values, inspect.isclass)
        if dataclasses.is_dataclass(cls) and cls.__module__ == values.__name__
    ]


@pytest.mark.parametrize("cls", _value_classes(), ids=lambda cls: cls.__name__)
def test_every_value_is_frozen_slotted_and_keyword_only(cls: type) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and "__slots__" in cls.__dict__
    assert all(f.kw_only for f in dataclasses.fields(cls)), cls.__name__


def test_a_value_cannot_change() -> None:
    part = TextPart(text="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.text = "y"  # type: ignore[misc]
