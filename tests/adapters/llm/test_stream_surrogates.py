"""Lone UTF-16 surrogates in a model stream: both providers hand on only encodable text.

A server may escape any UTF-16 unit in its JSON (`"\\ud83d"`), so an emoji can arrive as
two halves in two chunks, and a broken server can send a half alone. The halves must be
joined, a lone one replaced with U+FFFD, the repairs counted on the `ModelResponse`, and
every chunk must encode as UTF-8 (what the store and both wires need).
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from steerable_bridge.runtime.ports.model import (
    ModelResponse,
    ModelStreamItem,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)

from . import test_anthropic as anth
from . import test_openai_compat as oai
from .fake_anthropic import Recorder as AnthropicRecorder
from .fake_anthropic import Stream
from .fake_anthropic import ok as anthropic_ok

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

GRIN = "\U0001f600"
FFFD = "\ufffd"


def encodable(items: list[ModelStreamItem]) -> None:
    for item in items:
        for spec in dataclasses.fields(item):
            value = getattr(item, spec.name)
            if isinstance(value, str):
                value.encode("utf-8")  # raises on any surrogate


def replaced(items: list[ModelStreamItem]) -> int:
    response = items[-1]
    assert isinstance(response, ModelResponse)
    return response.replaced_surrogates


def reasoning_of(items: list[ModelStreamItem]) -> str:
    return "".join(i.delta for i in items if isinstance(i, ReasoningChunk))


# -- OpenAI-compatible ----------------------------------------------------------------------


async def oai_items(*chunks: dict[str, object]) -> list[ModelStreamItem]:
    body = oai.sse(*chunks)
    items = await oai.collect(oai.mock_provider(oai.Recorder([oai.ok(body)])))
    encodable(items)
    return items


async def test_openai_lone_surrogate_in_content_becomes_fffd_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    items = await oai_items(oai.chunk({"content": "bad \ud800 here"}), oai.chunk(finish="stop"))
    assert oai.text_of(items) == f"bad {FFFD} here"
    assert replaced(items) == 1
    assert "1 lone UTF-16 surrogate" in caplog.text


async def test_openai_pair_split_into_one_unit_chunks_is_joined() -> None:
    items = await oai_items(
        oai.chunk({"content": "a"}),
        oai.chunk({"content": "\ud83d"}),
        oai.chunk({"content": "\ude00"}),
        oai.chunk({"content": "b"}),
        oai.chunk({"reasoning_content": "\ud83d"}),
        oai.chunk({"reasoning_content": "\ude00"}),
        oai.chunk(finish="stop"),
    )
    assert oai.text_of(items) == f"a{GRIN}b"
    assert reasoning_of(items) == GRIN
    assert replaced(items) == 0
    assert all(i.delta for i in items if isinstance(i, TextChunk | ReasoningChunk))


async def test_openai_high_surrogate_at_the_end_of_the_stream_is_flushed_as_fffd() -> None:
    items = await oai_items(oai.chunk({"content": "end \ud83d"}), oai.chunk(finish="stop"))
    assert oai.text_of(items) == f"end {FFFD}"
    assert replaced(items) == 1


async def test_openai_held_half_is_let_go_before_another_stream_speaks() -> None:
    items = await oai_items(
        oai.chunk({"reasoning_content": "hm \ud83d"}),
        oai.chunk({"content": "answer"}),
        oai.chunk(finish="stop"),
    )
    kinds = [(type(i).__name__, getattr(i, "delta", None)) for i in items[:-1]]
    assert kinds == [
        ("ReasoningChunk", "hm "),
        ("ReasoningChunk", FFFD),
        ("TextChunk", "answer"),
    ]


async def test_openai_surrogates_in_tool_call_arguments_ids_and_names() -> None:
    items = await oai_items(
        oai.call_fragment(0, id="call_\udc00", name="read_file", args='{"path": "'),
        oai.call_fragment(0, args="\ud83d"),
        oai.call_fragment(0, args="\ude00"),
        oai.call_fragment(0, args='\ud800.txt"}'),
        oai.chunk(finish="tool_calls"),
    )
    calls = oai.calls_of(items)
    assert calls == {f"call_{FFFD}": ("read_file", f'{{"path": "{GRIN}{FFFD}.txt"}}')}
    assert replaced(items) == 2


async def test_openai_error_body_with_a_surrogate_gives_an_encodable_message() -> None:
    rec = oai.Recorder([oai.fail(400, "bad \ud800 input")])
    with pytest.raises(Exception) as caught:
        await oai.collect(oai.mock_provider(rec))
    message = str(caught.value)
    message.encode("utf-8")
    assert f"bad {FFFD} input" in message


# -- Anthropic ------------------------------------------------------------------------------


async def anthropic_items(stream: Stream) -> list[ModelStreamItem]:
    rec = AnthropicRecorder([anthropic_ok(stream)])
    items = await anth.collect(anth.provider(rec, sizes=(1, 2, 5)))
    encodable(items)
    return items


async def test_anthropic_lone_surrogate_in_text_becomes_fffd_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    items = await anthropic_items(Stream().start().text("bad \ud800 here").stop())
    assert anth.text_of(items) == f"bad {FFFD} here"
    assert replaced(items) == 1
    assert "1 lone UTF-16 surrogate" in caplog.text


async def test_anthropic_pair_split_across_deltas_is_joined_in_text_and_thinking() -> None:
    stream = (
        Stream()
        .start()
        .thinking("\ud83d", "\ude00", signature="sig")
        .text("a", "\ud83d", "\ude00", "b")
        .stop()
    )
    items = await anthropic_items(stream)
    assert anth.text_of(items) == f"a{GRIN}b"
    assert reasoning_of(items) == GRIN
    assert replaced(items) == 0


async def test_anthropic_half_held_when_its_block_stops_becomes_fffd_in_that_block() -> None:
    items = await anthropic_items(Stream().start().text("x\ud83d").text("next").stop())
    texts = [i.delta for i in items if isinstance(i, TextChunk)]
    assert texts == ["x", FFFD, "next"]
    assert replaced(items) == 1


async def test_anthropic_surrogates_in_tool_input_id_and_name() -> None:
    stream = (
        Stream()
        .start()
        .tool_use("toolu_\ud800", "read_file", '{"path": "', "\ud83d", "\ude00", '\udfff"}')
        .stop("tool_use")
    )
    items = await anthropic_items(stream)
    calls = anth.calls_of(items)
    assert calls == {f"toolu_{FFFD}": ("read_file", f'{{"path": "{GRIN}{FFFD}"}}')}
    assert replaced(items) == 2
    assert all(isinstance(i, ToolCallChunk | ModelResponse) for i in items)


async def test_anthropic_error_event_with_a_surrogate_gives_an_encodable_message() -> None:
    stream = Stream().start().text("partial").error("invalid_request_error", "no \ud800 way")
    rec = AnthropicRecorder([anthropic_ok(stream)])
    with pytest.raises(Exception) as caught:
        await anth.collect(anth.provider(rec))
    message = str(caught.value)
    message.encode("utf-8")
    assert f"no {FFFD} way" in message
