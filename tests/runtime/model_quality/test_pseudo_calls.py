"""Pseudo tool-call recovery: a corpus of raw model outputs per format, and properties that
hold for every way the text may be split into deltas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime.model_quality.pseudo_calls import PseudoCallFilter
from steerable_bridge.runtime.model_quality.tool_markers import DS_CALL_BEGIN, DS_CALLS_BEGIN
from steerable_bridge.runtime.ports.model import ModelChunk, TextChunk, ToolCallChunk, ToolSpec
from steerable_bridge.runtime.values import canonical_json
from tests.lanes import examples

CORPUS = json.loads((Path(__file__).parents[1] / "data" / "pseudo_calls.json").read_text("utf-8"))
TOOLS = tuple(
    ToolSpec(name=name, description="", parameters_json=canonical_json(schema))
    for name, schema in CORPUS["tools"].items()
)
CASES = {case["name"]: case for case in CORPUS["cases"]}
POSITIVE = [name for name, case in CASES.items() if case["calls"]]
MARKERS = (
    "<tool_call>", "</tool_call>", "<function=", "</function>", DS_CALLS_BEGIN, DS_CALL_BEGIN,
    "<invoke", "<parameter", "[TOOL_CALLS]", "<|python_tag|>", "[Tool call:", '"arguments"',
)  # fmt: skip


def run(chunks: list[str]) -> tuple[str, list[dict[str, Any]], list[str]]:
    """Feed the chunks; returns the shown text, the recovered calls and their formats."""
    recovery = PseudoCallFilter(TOOLS)
    out: list[ModelChunk] = []
    for chunk in chunks:
        out += recovery.feed(chunk)
    out += recovery.finish()
    text = "".join(c.delta for c in out if isinstance(c, TextChunk))
    calls = [c for c in out if isinstance(c, ToolCallChunk)]
    found = [{"name": c.name, "arguments": json.loads(c.arguments_delta)} for c in calls]
    return text, found, [c.recovered_from or "" for c in calls]


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_as_the_server_streamed_it(name: str) -> None:
    case = CASES[name]
    text, calls, formats = run(case["chunks"])
    assert calls == case["calls"]
    assert text == case["text"]
    assert formats == [case["format"]] * len(calls)


def test_the_corpus_covers_every_format() -> None:
    formats = {CASES[name]["format"] for name in POSITIVE}
    assert formats == {
        "hermes", "function_tag", "deepseek", "minimax", "mistral", "python_tag",
        "bare_json", "pythonic", "fenced_json", "markdown",
    }  # fmt: skip


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(st.sampled_from(sorted(CASES)), st.lists(st.integers(min_value=0), max_size=40))
def test_every_split_gives_the_same_calls_and_text(name: str, cuts: list[int]) -> None:
    case = CASES[name]
    whole = "".join(case["chunks"])
    text, calls, _ = run(split_at(whole, cuts))
    assert calls == case["calls"]
    assert text == case["text"]
    if case["calls"]:
        assert not any(marker in text for marker in MARKERS)


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(st.text(max_size=300), st.lists(st.integers(min_value=0), max_size=30))
def test_prose_passes_through_byte_identical(prose: str, cuts: list[int]) -> None:
    text, calls, _ = run(split_at(prose, cuts))
    assert calls == []
    assert text == prose


_PROSE = st.text(
    alphabet=st.characters(blacklist_characters="`{[<", blacklist_categories=("Cs",)),
    max_size=40,
).filter(lambda s: s.strip() != "" or s == "")
_EMBEDDED = [name for name in POSITIVE if CASES[name]["format"] not in
             ("bare_json", "pythonic", "fenced_json")]  # fmt: skip


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(_PROSE, st.sampled_from(_EMBEDDED)), min_size=1, max_size=4),
    _PROSE,
    st.lists(st.integers(min_value=0), max_size=40),
)
def test_calls_between_prose_are_recovered_and_the_prose_kept(
    parts: list[tuple[str, str]], tail: str, cuts: list[int]
) -> None:
    prose = [p for p, _ in parts] + [tail]
    markup = ["".join(CASES[n]["chunks"]) for _, n in parts]
    expected_text = "".join(p + CASES[n]["text"] for p, n in parts) + tail
    document = "".join(p + m for p, m in zip(prose, markup, strict=False)) + tail
    text, calls, _ = run(split_at(document, cuts))
    assert calls == [call for _, n in parts for call in CASES[n]["calls"]]
    assert text == expected_text
    assert not any(marker in text for marker in MARKERS)


def test_only_offered_tools_are_recovered() -> None:
    recovery = PseudoCallFilter(TOOLS[1:])  # read_file not offered
    out = recovery.feed(
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>'
    )
    out += recovery.finish()
    assert all(isinstance(c, TextChunk) for c in out)
    assert recovery.recovered == 0


def test_prose_is_released_as_soon_as_it_cannot_be_markup() -> None:
    recovery = PseudoCallFilter(TOOLS)
    assert recovery.feed("Hello") == [TextChunk(delta="Hello")]
    assert recovery.feed(" <tool") == [TextChunk(delta=" ")]  # "<tool" may still be markup
    assert recovery.feed("s are fun") == [TextChunk(delta="<tools are fun")]
    assert recovery.feed(" `x") == [TextChunk(delta=" `x")]


# -- through the loop ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_text_written_call_runs_through_the_permission_path() -> None:
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.model_quality.quality import QualitySettings
    from steerable_bridge.runtime.ports.permissions import (
        PermissionAnswer,
        PermissionRequest,
        StaticPolicy,
    )
    from tests.runtime.harness import (
        assert_well_formed,
        make_agent,
        of,
        prompt,
        scripted,
        text_tool,
    )

    markup = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>'
    model = scripted({"text": "Let me echo.\n" + markup, "chunk_size": 3}, {"text": "Done."})
    agent = make_agent(
        model, tools=[text_tool(kind="edit")], approval="ask", quality=QualitySettings(mode="on")
    )
    session = await agent.new_session("/w")
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request)
        return PermissionAnswer(outcome="allow_once", option_id="allow_once")

    session.policy = StaticPolicy("ask", ask)
    outcome, seen = await prompt(session)
    assert [r.call.name for r in asked] == ["echo"]
    assert of(seen, ev.PermissionResolved)[0].outcome == "allow_once"
    assert outcome.stop_reason == "end_turn"
    shown = "".join(e.delta for e in of(seen, ev.TextDelta))
    assert shown == "Let me echo.\nDone."
    action = of(seen, ev.HookAction)[0]
    end = of(seen, ev.ToolCallEnd)[0]
    assert (action.action, action.detail, action.call_id) == (
        "recover_tool_call",
        "hermes",
        end.call_id,
    )
    assert end.name == "echo" and end.arguments_json == '{"text":"hi"}'
    assert of(seen, ev.ToolFinished)[0].status == "completed"
    assert of(seen, ev.StepFinished)[0].finish_reason == "tool_calls"
    assert_well_formed(seen)


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_recovery_is_off_when_quality_is_off() -> None:
    from steerable_bridge.runtime import events as ev
    from tests.runtime.harness import make_agent, of, prompt, scripted, text_tool

    markup = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'
    agent = make_agent(scripted({"text": markup}), tools=[text_tool()])
    _, seen = await prompt(await agent.new_session("/w"))
    assert "".join(e.delta for e in of(seen, ev.TextDelta)) == markup
    assert of(seen, ev.ToolCallEnd) == []
