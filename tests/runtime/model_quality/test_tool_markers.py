"""The marker table (`runtime/model_quality/tool_markers.py`): every format's opener, kind and early
`viable` verdict (True: markup, False: prose, None: cannot tell yet, never a guess), the
lookup tables the stripper reads (`BY_FIRST` / `BY_TWO` longest first, `SINGLE` for one
character), and `may_open`, the fast path that must find every place a marker may start
and nothing in ordinary prose."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.model_quality.tool_markers import (
    BY_FIRST,
    BY_TWO,
    CALL_KEYS,
    DS_CALLS_BEGIN,
    MARKERS,
    SINGLE,
    START_MARKERS,
    Marker,
    key_viable,
    list_viable,
    may_open,
)

BY_TEXT = {marker.text: marker for marker in MARKERS}


def viable(text: str, rest: str) -> bool | None:
    marker = BY_TEXT[text]
    assert marker.viable is not None, text
    return marker.viable(rest)


def test_the_fast_path_knows_how_every_marker_starts() -> None:
    for marker in MARKERS:
        assert may_open("x" + marker.text[:2]) is not None, marker.text
        assert may_open("x" + marker.text[0]) is not None, marker.text  # may continue
    assert may_open("a < b and c > d <b> x") is None


def test_the_fast_path_finds_code_and_brackets_but_not_plain_comparisons() -> None:
    assert may_open("see `x`") is not None and may_open("a [b]") is not None
    assert may_open("a {b}") is not None and may_open("a >>> b") is not None
    assert may_open("a > b") is None and may_open("x <= y") is None


def test_lookups_try_longer_markers_first() -> None:
    for group in BY_FIRST.values():
        lengths = [len(marker.text) for marker in group]
        assert lengths == sorted(lengths, reverse=True)
    assert [m.text for m in BY_TWO["<t"]][:2] == ["<tool_calls>", "<tool_call>"]
    assert [m.text for m in BY_FIRST["["]] == ["[TOOL_CALLS]", "[Tool call:", "["]
    assert set(SINGLE) == {"[", "{"}
    assert all(len(two) == 2 and all(m.text.startswith(two) for m in ms)
               for two, ms in BY_TWO.items())  # fmt: skip


def test_every_marker_is_well_formed_for_its_kind() -> None:
    for marker in (*MARKERS, *START_MARKERS):
        if marker.kind == "think":
            assert marker.close, marker.text
        if marker.kind == "candidate":
            assert marker.format and marker.format != "frame", marker.text
    assert len({m.text for m in MARKERS}) == len(MARKERS), "a marker is listed twice"
    assert {m.text for m in START_MARKERS}.isdisjoint(BY_TEXT)


def test_deepseek_tokens_use_full_width_bars_and_word_joiners() -> None:
    assert DS_CALLS_BEGIN == "<\uff5ctool\u2581calls\u2581begin\uff5c>"


@pytest.mark.parametrize(
    ("rest", "verdict"),
    [
        ("", None),
        ("  ", None),
        ('"na', None),  # a prefix of "name"
        ('"name"', True),
        (' "arguments"', True),
        ('"colour"', False),
        ('"zz', False),  # no call key starts so
        ("1", False),
    ],
)
def test_key_viable_reads_the_first_key_of_an_object(rest: str, verdict: bool | None) -> None:
    assert key_viable(rest) is verdict


def test_every_call_key_is_viable() -> None:
    assert all(key_viable(f'"{key}"') is True for key in CALL_KEYS)


@pytest.mark.parametrize(
    ("rest", "verdict"),
    [
        ("", None),
        ('{"name"', True),
        ('{"colour"', False),
        ("get(", True),
        (" get (", True),
        ("a.b(", True),
        ("get", None),  # `(` may follow
        ("get x", False),
        ("1, 2", False),
    ],
)
def test_list_viable_wants_a_call_object_or_a_pythonic_call(
    rest: str, verdict: bool | None
) -> None:
    assert list_viable(rest) is verdict


@pytest.mark.parametrize(
    ("marker", "rest", "verdict"),
    [
        ("<tool_call>", "", None),
        ("<tool_call>", "\n{", True),
        ("<tool_call>", "<func", None),
        ("<tool_call>", "<function=", True),
        ("<tool_call>", "<b>", False),
        ("<tool_call>", "get_weather\n", True),  # GLM: a name on its own line
        ("<tool_call>", "get<arg_", None),
        ("<tool_call>", "get<arg_key>", True),
        ("<tool_call>", "get</tool_call>", True),
        ("<tool_call>", "get x", False),
        ("<tool_call>", "!", False),
        ("<function=", "name", None),
        ("<function=", "name>", True),
        ("<function=", "name x", False),
        ("<function=", ">", False),  # a name is required
        ("[Tool call:", " get (", True),
        ("[Tool call:", " get x", False),
        ("<|python_tag|>", "{", True),
        ("<|python_tag|>", "brave_search.call(", True),
        ("<|python_tag|>", "brave.call", None),
        ("<|python_tag|>", "foo(", False),  # only NAME.call( is a built-in call
        ("<|python_tag|>", ".call(", False),
        ("[TOOL_CALLS]", "[", True),
        ("[TOOL_CALLS]", "name", None),
        ("[TOOL_CALLS]", "name{", True),
        ("[TOOL_CALLS]", "name x", False),
        (">>>", "name", None),
        (">>>", "name\n", None),
        (">>>", "name\n{", True),
        (">>>", "name\nx", False),
        (">>>", "name x", False),
        (">>>", "name {", False),  # the object must start on the next line
        (">>>", "\n{", False),
        ("<invoke name=", '"x"', True),
        ("<invoke name=", "x", False),
        ("<tools>", " [", True),
        ("<tools>", "text", False),
    ],
)
def test_a_marker_decides_early_and_only_when_it_can(
    marker: str, rest: str, verdict: bool | None
) -> None:
    assert viable(marker, rest) is verdict


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("[TOOL_CALLS] [{", 13),  # a list: from the list
        ("[TOOL_CALLS]name{", 16),  # v11: from the object
        ("[TOOL_CALLS]name[ARGS]{", 22),  # after [ARGS]
        ("[TOOL_CALLS]name", None),  # not known yet
    ],
)
def test_mistral_says_where_its_balanced_part_starts(text: str, start: int | None) -> None:
    body_at = BY_TEXT["[TOOL_CALLS]"].body_at
    assert body_at is not None
    assert body_at(text) == start


def test_reasoning_openers_and_functools_are_start_only() -> None:
    start = {m.text: m for m in START_MARKERS}
    assert start["<think>"].kind == "think" and start["<think>"].close == ("</think>",)
    functools = start["functools"]
    assert functools.viable is not None
    assert functools.viable("") is None and functools.viable("[") is True
    assert functools.viable(" is a module") is False
    assert "<think>" not in BY_TEXT and "</think>" in BY_TEXT
    assert BY_TEXT["</think>"].kind == "frame"


def test_a_marker_is_a_frozen_value() -> None:
    marker = Marker("<x>", "x")
    with pytest.raises(AttributeError):
        marker.text = "<y>"  # type: ignore[misc]
    assert marker.kind == "candidate" and marker.viable is None and marker.end_tag is None
