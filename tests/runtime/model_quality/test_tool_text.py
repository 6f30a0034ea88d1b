"""`MarkupStripper` (`runtime/model_quality/tool_text.py`) on its own: it splits a stream of
model text into prose, `Reasoning` and `Markup` candidates; prose is released byte for byte
as soon as it cannot become markup, a marker split across deltas is held until it is
decided, markup in code is prose, framing tokens are dropped, leading whitespace goes with a
call that starts the reply, `finish()` flushes what is held, and the result never depends on
the split. The corpus of real formats is in `test_tool_formats.py`; this pins the stripper's
own rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime.model_quality.tool_text import (
    Markup,
    MarkupStripper,
    Piece,
    Reasoning,
)
from tests.lanes import examples

CALL = '<tool_call>{"name": "x"}</tool_call>'


def stream(chunks: list[str], *, calls: bool = True) -> list[list[Piece]]:
    """What each `feed` returned, then what `finish` returned."""
    stripper = MarkupStripper(calls=calls)
    return [stripper.feed(chunk) for chunk in chunks] + [stripper.finish()]


def flat(chunks: list[str], *, calls: bool = True) -> list[Piece]:
    """Everything the stream produced, adjacent prose and reasoning joined."""
    out: list[Piece] = []
    for piece in (p for step in stream(chunks, calls=calls) for p in step):
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] += piece
        elif isinstance(piece, Reasoning) and out and isinstance(out[-1], Reasoning):
            out[-1] = Reasoning(out[-1].text + piece.text)
        else:
            out.append(piece)
    return out


def test_a_call_between_prose_is_one_markup_piece_and_the_prose_is_kept() -> None:
    assert stream([f"Hello {CALL} bye"]) == [["Hello ", Markup("hermes", CALL), " bye"], []]


def test_a_marker_split_across_deltas_is_held_and_prose_before_it_released() -> None:
    steps = stream(["Hello <tool_c", 'all>{"name": "x"}</tool_', "call> bye"])
    assert steps == [["Hello "], [], [Markup("hermes", CALL), " bye"], []]


def test_prose_that_cannot_be_markup_is_released_at_once() -> None:
    stripper = MarkupStripper()
    assert stripper.feed("Hello ") == ["Hello "]
    assert stripper.feed("world, 1 < 2 and a > b.") == ["world, 1 < 2 and a > b."]
    assert stripper.finish() == []


def test_plain_is_the_fast_path_only_once_past_the_start_with_nothing_held() -> None:
    stripper = MarkupStripper()
    assert not stripper.plain("abc")  # the very start: whitespace or `<think>` may follow
    stripper.feed("hello ")
    assert stripper.plain("abc") and stripper.plain("a<b") and stripper.plain("x]")
    assert not stripper.plain("a<tool") and not stripper.plain("a {") and not stripper.plain("`")
    stripper.feed("<tool")
    assert not stripper.plain("abc")  # a marker's start is held


def test_leading_whitespace_goes_with_a_call_that_starts_the_reply() -> None:
    assert flat(["  ", CALL]) == [Markup("hermes", "  " + CALL)]
    assert flat(["  Hi ", CALL]) == ["  Hi ", Markup("hermes", CALL)]


def test_markup_in_inline_code_or_a_code_fence_is_prose() -> None:
    inline = f"a `{CALL}` b"
    fenced = f"```\n{CALL}\n```\nz"
    assert flat([inline]) == [inline]
    assert flat([fenced]) == [fenced]
    assert flat(["`a`\n", CALL]) == ["`a`\n", Markup("hermes", CALL)]  # the span closed


def test_inline_code_never_spans_a_line() -> None:
    assert flat(["an open ` tick\n", CALL]) == ["an open ` tick\n", Markup("hermes", CALL)]


def test_a_fenced_json_block_that_opens_like_a_call_is_a_candidate() -> None:
    block = '```json\n{"name": "x"}\n```'
    assert flat([block + "\nz"]) == [Markup("fenced_json", block), "\nz"]
    code = '```json\n{"colour": "red"}\n```\nz'
    assert flat([code]) == [code]  # not a call's first key: shown as code
    python = "```python\nprint(1)\n```"
    assert flat([python]) == [python]


def test_a_backtick_run_at_the_end_of_a_delta_is_held_until_it_stops_growing() -> None:
    assert stream(["x ``", "`"]) == [["x "], [], ["```"]]


def test_reasoning_at_the_start_is_reasoning_and_framing_tokens_are_dropped() -> None:
    assert flat(["<think>hmm</think>Answer<|im_end|>"]) == [Reasoning("hmm"), "Answer"]
    assert flat(["<seed:think>a</seed:think>b"]) == [Reasoning("a"), "b"]


def test_think_inside_the_answer_is_prose_but_a_stray_close_tag_is_dropped() -> None:
    assert flat(["Hi <think>hmm</think> ok"]) == ["Hi <think>hmm ok"]


def test_reasoning_streams_as_it_arrives_and_only_a_close_tag_prefix_is_held() -> None:
    steps = stream(["<think>step one, ", "step two</th", "ink>Done"])
    assert steps == [[Reasoning("step one, ")], [Reasoning("step two")], ["Done"], []]


def test_a_call_right_after_reasoning_takes_the_whitespace_between() -> None:
    assert flat(["<think>plan</think>\n", CALL]) == [
        Reasoning("plan"),
        Markup("hermes", "\n" + CALL),
    ]


def test_harmony_channels_split_analysis_from_the_final_answer() -> None:
    text = (
        "<|channel|>analysis<|message|>thinking<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hi"
    )
    assert flat([text]) == [Reasoning("thinking"), "Hi"]


def test_a_harmony_header_with_a_recipient_is_a_call_up_to_its_call_token() -> None:
    call = '<|channel|>commentary to=functions.x <|constrain|>json<|message|>{"a": 1}<|call|>'
    assert flat([call + " after"]) == [Markup("harmony", call), " after"]


def test_an_overlong_harmony_header_is_prose() -> None:
    text = "<|channel|>" + "a" * 400
    assert flat([text]) == [text]


def test_bare_json_and_pythonic_lists_are_candidates_only_when_they_look_like_calls() -> None:
    prose = 'x [1, 2] y {"a": 1} z'
    assert flat([prose]) == [prose]
    assert flat(["x [get(a=1)] y"]) == ["x ", Markup("pythonic", "[get(a=1)]"), " y"]
    chain = '{"name": "a"}; {"name": "b"}'
    assert flat([f"Hi {chain} end"]) == ["Hi ", Markup("bare_json", chain), " end"]


def test_finish_flushes_an_unterminated_candidate_as_markup() -> None:
    assert stream(['x {"name": 1']) == [["x "], [Markup("bare_json", '{"name": 1')]]
    assert stream(["x <tool_call>{"]) == [["x "], [Markup("hermes", "<tool_call>{")]]


def test_finish_flushes_unterminated_reasoning_as_reasoning() -> None:
    assert flat(["<think>abc</th"]) == [Reasoning("abc</th")]


def test_finish_resets_the_open_candidate_so_the_next_text_is_prose() -> None:
    stripper = MarkupStripper()
    stripper.feed("x <tool_call>{")
    stripper.finish()
    assert stripper.feed("plain text") == ["plain text"]


def test_without_calls_only_reasoning_and_framing_are_split() -> None:
    text = f'<think>plan</think>{CALL} {{"name": "y"}} [f(a=1)]<|im_end|>'
    assert flat([text], calls=False) == [Reasoning("plan"), f'{CALL} {{"name": "y"}} [f(a=1)]']


def test_an_empty_delta_yields_nothing() -> None:
    stripper = MarkupStripper()
    assert stripper.feed("") == []
    assert stripper.finish() == []


_DOCUMENTS = [
    f"Hello {CALL} bye",
    "<think>hmm</think>\n" + CALL + "\nDone.",
    'a `<tool_call>` b\n```json\n{"name": "x"}\n```\n[f(a=1)] and {"a": 1}.',
    "<|channel|>analysis<|message|>t<|end|><|start|>assistant<|channel|>final<|message|>ok",
    'Use ```` and ``x`` then {"name": "a"}; {"name": "b"} end <|eot_id|>',
]


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(st.sampled_from(_DOCUMENTS), st.lists(st.integers(min_value=0), max_size=30))
def test_the_result_does_not_depend_on_where_the_text_is_split(
    document: str, cuts: list[int]
) -> None:
    points = sorted({c % (len(document) + 1) for c in cuts})
    chunks = [document[a:b] for a, b in zip([0, *points], [*points, len(document)], strict=True)]
    assert flat(chunks) == flat([document])
