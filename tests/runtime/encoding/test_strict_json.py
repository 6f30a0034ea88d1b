"""`runtime/encoding/strict_json.py`: `loads_strict` accepts only JSON every strict parser would
accept and refuses the rest with one exception, `JsonRefused`, whose `code` is stable
(`not_utf8`, `not_json`, `too_deep`, `non_finite`, `out_of_range`, `lone_surrogate`) and
whose message names the remedy; `nesting_exceeds` bounds depth before the recursive parser
runs; `writable` says whether a value encodes as strict UTF-8 JSON, and `scrub` makes any
value writable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime.encoding.strict_json import (
    MAX_DEPTH,
    JsonRefused,
    loads_strict,
    nesting_exceeds,
    scrub,
    writable,
)
from steerable_bridge.runtime.errors import CodedError
from tests.lanes import examples


def refusal(data: bytes | str, **options: Any) -> JsonRefused:
    with pytest.raises(JsonRefused) as caught:
        loads_strict(data, **options)
    return caught.value


@pytest.mark.parametrize(
    ("data", "value"),
    [
        ('{"a": [1, 2.5, "x", null, true]}', {"a": [1, 2.5, "x", None, True]}),
        (b'{"k": "\xc3\xa9"}', {"k": "\u00e9"}),
        ('"\\ud83d\\ude00"', "\U0001f600"),  # a surrogate pair is one character
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash, not a surrogate
        ("1e308", 1e308),
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)),
    ],
)
def test_strict_json_is_read_as_the_standard_parser_reads_it(data: bytes | str, value: Any) -> None:
    assert loads_strict(data) == value


@pytest.mark.parametrize(
    ("data", "code", "remedy"),
    [
        (b"\xff{}", "not_utf8", "send UTF-8"),
        (b'"\xed\xa0\x80"', "not_utf8", "send UTF-8"),  # a surrogate encoded as UTF-8
        ("{", "not_json", "not JSON"),
        ("", "not_json", "not JSON"),
        ("NaN", "non_finite", "finite decimals"),
        ("[-Infinity]", "non_finite", "finite decimals"),
        ('{"a": Infinity}', "non_finite", "finite decimals"),
        ("1e400", "out_of_range", "send a smaller one"),
        ("[1e400, NaN]", "non_finite", "finite decimals"),  # parsed on past the big number
        ('[1e400, "\\ud800"]', "lone_surrogate", "send valid Unicode"),
        ("[1e400, {]", "not_json", "not JSON"),
        ("\ufeff{}", "not_json", "not JSON"),  # a byte order mark, as json.loads says
        ('"\\ud800"', "lone_surrogate", "send valid Unicode"),
        ('{"\\udc00": 1}', "lone_surrogate", "send valid Unicode"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "too_deep", "flatten it"),
        ("[" * 5000, "too_deep", "flatten it"),  # unbalanced and deep: refused before parsing
    ],
)
def test_lenient_json_is_refused_with_a_code_and_a_remedy(
    data: bytes | str, code: str, remedy: str
) -> None:
    error = refusal(data)
    assert error.code == code
    assert remedy in str(error)
    assert isinstance(error, ValueError) and isinstance(error, CodedError)


def test_the_not_utf8_message_names_the_byte_and_its_offset() -> None:
    assert "byte 0xff at offset 2" in str(refusal(b"[1\xff]"))


def test_a_smaller_depth_bound_is_honoured() -> None:
    assert loads_strict("[[1]]", max_depth=2) == [[1]]
    assert refusal("[[[1]]]", max_depth=2).code == "too_deep"


def test_the_parsers_recursion_limit_is_a_refusal_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert refusal(deep, max_depth=10**6).code == "not_json"


@pytest.mark.parametrize(
    ("text", "limit", "exceeds"),
    [
        ("[[]]", 2, False),
        ("[[[]]]", 2, True),
        ('["[[[[[[", {"{{{{": "]]]"}]', 2, False),  # brackets in strings do not count
        ('["a\\"[[[[[["]', 2, False),  # nor after an escaped quote
        ("[{}, {}, {}, [], []]", 2, False),  # wide is not deep
        ("[[[", 2, True),  # unbalanced, more brackets than the limit
        ("[1]", 0, True),
    ],
)
def test_nesting_is_measured_without_parsing(text: str, limit: int, exceeds: bool) -> None:
    assert nesting_exceeds(text, limit) is exceeds


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"a": [1, "x", None]}, True),
        (float("nan"), False),
        ([float("inf")], False),
        ("\ud800", False),
        ({"\udc00": 1}, False),
        ({1, 2}, False),  # not JSON at all
    ],
)
def test_writable_says_whether_a_value_encodes_as_strict_json(value: Any, ok: bool) -> None:
    assert writable(value) is ok


def test_scrub_replaces_what_strict_json_cannot_hold_and_keeps_the_rest() -> None:
    value = {"a": float("nan"), "b": ["\ud800", (1.5, float("-inf"))], "\udc00": 1, 3: "x"}
    assert scrub(value) == {"a": None, "b": ["\ufffd", [1.5, None]], "\ufffd": 1, 3: "x"}
    assert scrub("\ud83d\ude00") == "\U0001f600"  # a pair split in two units is joined


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(_ANY)
def test_any_scrubbed_value_is_writable_and_reads_back_strictly(value: Any) -> None:
    clean = scrub(value)
    assert writable(clean)
    text = json.dumps(clean, ensure_ascii=False, allow_nan=False)
    assert loads_strict(text) == loads_strict(text.encode("utf-8"))
