"""Token estimates: Latin vs CJK text, whole requests, and per-model calibration."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime.model_context.tokens import (
    RequestEstimator,
    TokenCalibration,
    estimate_request_tokens,
    estimate_text_tokens,
)
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import ImagePart, Message, TextPart, ToolCall
from tests.lanes import examples


def test_latin_text_costs_about_a_quarter_of_its_characters() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("a") == 1
    assert estimate_text_tokens("x" * 400) == 100


def test_cjk_text_costs_about_one_token_per_character() -> None:
    assert estimate_text_tokens("你好世界") == 4
    assert estimate_text_tokens("こんにちは") == 5
    assert estimate_text_tokens("你好 world") == 2 + 2


def test_request_estimate_counts_system_tools_messages_and_images() -> None:
    bare = ModelRequest(model="m", system="", messages=())
    with_all = ModelRequest(
        model="m",
        system="s" * 40,
        tools=(ToolSpec(name="read_file", description="d" * 40, parameters_json="{}"),),
        messages=(
            Message(id="1", role="user", content=(TextPart(text="q" * 80),)),
            Message(
                id="2",
                role="assistant",
                tool_calls=(ToolCall(call_id="c", name="read_file", arguments_json="{}"),),
            ),
            Message(id="3", role="user", content=(ImagePart(data="AAAA", mime_type="image/png"),)),
        ),
    )
    assert estimate_request_tokens(with_all) > estimate_request_tokens(bare) + 800 + 20 + 10


def test_calibration_applies_the_ratio_of_sums_only_after_enough_samples() -> None:
    cal = TokenCalibration(min_samples=3)
    cal.observe("m", 100, 150)
    cal.observe("m", 300, 450)
    assert cal.factor("m") == 1.0
    cal.observe("m", 600, 900)
    assert cal.samples("m") == 3
    assert cal.factor("m") == 1.5
    assert cal.calibrated("m", 1000) == 1500
    assert cal.factor("other") == 1.0
    cal.observe("m", 0, 10)  # unusable samples are ignored
    assert cal.samples("m") == 3


_POOL = [
    Message(id=f"m{i}", role="user", content=(TextPart(text="word " * i + "日本語" * (i % 3)),))
    for i in range(8)
]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=7), max_size=10), max_size=8))
def test_a_session_estimator_equals_the_estimate_of_each_whole_request(
    histories: list[list[int]],
) -> None:
    estimator = RequestEstimator()
    previous: tuple[Message, ...] = ()
    for picks in histories:
        # each request grows the previous one, or is rewritten (shorter, reordered, equal copies)
        grown = (*previous, *(_POOL[i] for i in picks))
        rewritten = tuple(dataclasses.replace(_POOL[i]) for i in picks)
        for messages in (grown, rewritten, grown[: len(grown) // 2]):
            request = ModelRequest(model="m", system="sys", messages=messages)
            assert estimator.estimate(request) == estimate_request_tokens(request)
        previous = grown
