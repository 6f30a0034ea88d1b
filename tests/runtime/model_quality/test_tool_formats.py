"""Every text tool-call and reasoning format a current inference server parses, from the
corpus in `data/tool_formats/` (`tool_corpus.py`), streamed at adversarial split points:
each positive yields exactly its calls, no markup reaches the visible text, no negative
runs, and reasoning written as text comes out as reasoning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime.model_quality.pseudo_calls import PseudoCallFilter
from steerable_bridge.runtime.model_quality.tool_text import MarkupStripper
from tests.lanes import examples
from tests.runtime.tool_corpus import CASES, TOOLS, leaks, run, splittings

POSITIVE = sorted(name for name, case in CASES.items() if case["calls"])
NEGATIVE = sorted(name for name, case in CASES.items() if case["must_not_run"])
REASONING = sorted(name for name, case in CASES.items() if case["reasoning"])


def test_the_corpus_covers_every_family_the_issue_names() -> None:
    families = " ".join(case["family"] for case in CASES.values())
    for family in (
        "GLM-4.5", "GLM-4.6", "Kimi-K2", "gpt-oss", "Granite", "InternLM2", "MiniMax-M1",
        "Jamba", "Phi-4-mini", "Firefunction", "OLMo-3", "Functionary v3.2", "Mistral v11",
        "Llama-4", "Llama 3.1", "DeepSeek-R1", "Hermes-2-Pro wrappers", "Qwen3-Coder",
        "Seed-OSS", "bare JSON", "pythonic", "fenced JSON", "MiniMax-M2", "Qwen3 / QwQ",
    ):  # fmt: skip
        assert family in families, family
    assert len(POSITIVE) >= 50 and len(NEGATIVE) >= 10
    assert all(case["source"] for case in CASES.values())
    assert all(bool(case["calls"]) != case["must_not_run"] or not case["calls"]
               for case in CASES.values())  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_adversarial_split_gives_the_same_calls_text_and_reasoning(name: str) -> None:
    case = CASES[name]
    for chunks in splittings(case["text"]):
        shown, reasoning, calls = run(chunks)
        assert calls == case["calls"], chunks
        assert shown == case["shown"], chunks
        assert reasoning == case["reasoning"], chunks
        if case["calls"]:
            assert leaks(shown) == 0, chunks


@settings(max_examples=examples(400), deadline=None, derandomize=True)
@given(st.sampled_from(sorted(CASES)), st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_gives_the_same_result(name: str, cuts: list[int]) -> None:
    case = CASES[name]
    text = case["text"]
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert run(chunks) == (case["shown"], case["reasoning"], case["calls"])


_PROSE = st.text(
    alphabet=st.characters(blacklist_characters="`{[<>", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() != "")
_EMBEDDABLE = [n for n in POSITIVE if not CASES[n]["reasoning"] and CASES[n]["family"]
               not in ("Phi-4-mini", "Firefunction v2", "Functionary v3.2")]  # fmt: skip
"""Cases that may sit between sentences (start-only markers and reasoning cases aside)."""


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(_PROSE, st.sampled_from(_EMBEDDABLE)), min_size=1, max_size=3),
    _PROSE,
    st.lists(st.integers(min_value=0), max_size=40),
)
def test_calls_of_every_format_between_prose_run_and_the_prose_stays(
    parts: list[tuple[str, str]], tail: str, cuts: list[int]
) -> None:
    document = "".join(p + " " + CASES[n]["text"].lstrip() for p, n in parts) + " " + tail
    expected = "".join(p + " " + CASES[n]["shown"] for p, n in parts) + " " + tail
    points = sorted({c % (len(document) + 1) for c in cuts})
    chunks = [document[a:b] for a, b in zip([0, *points], [*points, len(document)], strict=True)]
    shown, _, calls = run(chunks)
    assert calls == [call for _, n in parts for call in CASES[n]["calls"]]
    assert shown == expected
    assert leaks(shown) == 0


def test_a_call_to_a_tool_that_is_not_offered_stays_text_in_every_format() -> None:
    offered = tuple(tool for tool in TOOLS if tool.name not in ("get_weather",))
    for name in POSITIVE:
        case = CASES[name]
        if any(call["name"] == "get_weather" for call in case["calls"]):
            shown, _, calls = run(list(case["text"]), offered)
            assert all(call["name"] != "get_weather" for call in calls), name
            assert "get_weather" in shown, name


def test_without_tools_only_reasoning_is_split_and_markup_shown_as_written() -> None:
    text = '<think>Plan.</think>\n<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>'
    out = PseudoCallFilter(()).feed(text) + PseudoCallFilter(()).finish()
    stripper = MarkupStripper(calls=False)
    pieces = [p for ch in text for p in stripper.feed(ch)] + stripper.finish()
    shown = "".join(p for p in pieces if isinstance(p, str))
    assert shown == '\n<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>'
    assert out  # the filter answers without tools too


def test_reasoning_streams_as_it_arrives_not_at_its_end() -> None:
    recovery = PseudoCallFilter(TOOLS)
    first = recovery.feed("<think>step one, ")
    assert [getattr(c, "delta", None) for c in first] == ["step one, "]
    assert recovery.feed("step two</thi") != []
    assert [getattr(c, "type", "") for c in recovery.feed("nk>Answer")] == ["text"]


# -- through the loop ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_reasoning_written_as_text_is_reasoning_and_stays_out_of_the_answer() -> None:
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.model_quality.quality import QualitySettings
    from tests.runtime.harness import (
        assert_well_formed,
        make_agent,
        of,
        prompt,
        scripted,
        text_tool,
    )

    thinking = '<think>I should echo. <tool_call>{"name": "echo"}</tool_call></think>\n'
    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>'
    model = scripted(
        {"text": thinking + "Echoing.\n" + call, "chunk_size": 3},
        {"text": "<think>It worked.</think>Done.", "chunk_size": 2},
    )
    agent = make_agent(model, tools=[text_tool()], quality=QualitySettings(mode="on"))
    outcome, seen = await prompt(await agent.new_session("/w"))
    assert outcome.stop_reason == "end_turn"
    assert "".join(e.delta for e in of(seen, ev.TextDelta)) == "\nEchoing.\nDone."
    assert "".join(e.delta for e in of(seen, ev.ReasoningDelta)) == (
        'I should echo. <tool_call>{"name": "echo"}</tool_call>It worked.'
    )
    assert [e.name for e in of(seen, ev.ToolCallEnd)] == ["echo"]  # the quoted one never ran
    second = of(seen, ev.ModelRequestEvent)[1].request
    assistant = next(m for m in second.messages if m.role == "assistant")
    assert assistant.text == "\nEchoing.\n"  # the model's history holds no <think> markup
    assert assistant.reasoning == 'I should echo. <tool_call>{"name": "echo"}</tool_call>'
    assert_well_formed(seen)
