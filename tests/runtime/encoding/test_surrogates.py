"""Lone surrogates become U+FFFD and split pairs are joined, in one string or a stream."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from steerable_bridge.runtime.encoding.surrogates import (
    REPLACEMENT,
    SurrogateJoiner,
    has_surrogates,
    scrub,
    scrub_counted,
    scrub_json,
)

GRIN = "\U0001f600"


def test_clean_text_comes_back_as_the_same_object() -> None:
    for text in ("plain ascii", "héllo wörld", "日本語", GRIN, ""):
        assert scrub(text) is text
        assert scrub_counted(text) == (text, 0)
        assert not has_surrogates(text)


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    assert scrub_counted("a\ud800b") == (f"a{REPLACEMENT}b", 1)
    assert scrub_counted("\udc00") == (REPLACEMENT, 1)
    assert scrub_counted("x\ud83d\ud83dy") == (f"x{REPLACEMENT}{REPLACEMENT}y", 2)


def test_a_pair_held_as_two_units_is_joined_not_replaced() -> None:
    assert scrub_counted("a\ud83d\ude00b") == (f"a{GRIN}b", 0)
    assert has_surrogates("\ud83d\ude00")


def test_existing_replacement_characters_are_not_counted() -> None:
    assert scrub_counted(f"{REPLACEMENT}\ud800") == (REPLACEMENT * 2, 1)


def test_json_values_are_scrubbed_keys_included() -> None:
    value = {"k\ud800": ["\udfff", 1, None, {"n": 2.5}], "ok": "fine"}
    expected = {f"k{REPLACEMENT}": [REPLACEMENT, 1, None, {"n": 2.5}], "ok": "fine"}
    assert scrub_json(value) == expected


def test_a_pair_split_across_two_chunks_is_joined() -> None:
    joiner = SurrogateJoiner()
    assert joiner.feed("hi \ud83d") == "hi "
    assert joiner.feed("\ude00 there") == f"{GRIN} there"
    assert joiner.flush() == ""
    assert joiner.replaced == 0


def test_one_unit_per_chunk_still_joins() -> None:
    joiner = SurrogateJoiner()
    out = [joiner.feed(c) for c in ("\ud83d", "\ude00", "\ud83d", "\ude00")]
    assert "".join(out) + joiner.flush() == GRIN * 2
    assert out[0] == "" and joiner.replaced == 0


def test_a_high_surrogate_never_followed_by_its_pair_is_replaced() -> None:
    joiner = SurrogateJoiner()
    assert joiner.feed("a\ud83d") == "a"
    assert joiner.feed("b") == f"{REPLACEMENT}b"
    assert joiner.feed("\ud800") == ""
    assert joiner.flush() == REPLACEMENT
    assert joiner.flush() == ""
    assert joiner.replaced == 2


def test_a_lone_low_surrogate_opening_a_chunk_is_replaced() -> None:
    joiner = SurrogateJoiner()
    assert joiner.feed("\ude00x") == f"{REPLACEMENT}x"
    assert joiner.replaced == 1


units = st.lists(
    st.one_of(
        st.sampled_from(["\ud83d", "\ude00", "\ud800", "\udfff", "a", "é", "日", GRIN]),
        st.text(max_size=3),
    ),
    max_size=30,
)


@given(units, st.data())
def test_any_chunking_gives_encodable_text_equal_to_scrubbing_the_whole(
    parts: list[str], data: st.DataObject
) -> None:
    whole = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=8)))
    chunks = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    joiner = SurrogateJoiner()
    streamed = "".join(joiner.feed(c) for c in chunks) + joiner.flush()
    streamed.encode("utf-8")  # never raises
    expected, count = scrub_counted(whole)
    assert streamed == expected
    assert joiner.replaced == count


def test_what_json_decodes_from_escapes_is_repaired() -> None:
    first, second = json.loads('["\\ud83d", "\\ude00"]')
    joiner = SurrogateJoiner()
    assert joiner.feed(first) + joiner.feed(second) == GRIN
