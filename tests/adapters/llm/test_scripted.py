"""The scripted model replays its rounds exactly, and breaks the contract only when told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider, load_script
from steerable_bridge.runtime.ports.model import (
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import Usage

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REQUEST = ModelRequest(model="scripted:x", system="", messages=())


def provider(*rounds: dict[str, Any], **script: Any) -> ScriptedProvider:
    return ScriptedProvider(Script.model_validate({"rounds": list(rounds), **script}))


async def items(p: ScriptedProvider) -> list[ModelStreamItem]:
    with anyio.fail_after(5):
        return [item async for item in p.stream(REQUEST)]


async def test_a_round_streams_reasoning_text_calls_then_one_response() -> None:
    p = provider(
        {
            "reasoning": "hmm",
            "text": "hello!",
            "chunk_size": 4,
            "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "cached_tokens": 1},
        }
    )
    got = await items(p)
    assert got[:3] == [
        ReasoningChunk(delta="hmm"),
        TextChunk(delta="hell"),
        TextChunk(delta="o!"),
    ]
    calls = [i for i in got if isinstance(i, ToolCallChunk)]
    assert calls[0].name == "f" and all(c.name is None for c in calls[1:])
    assert {c.call_id for c in calls} == {"c1"}
    assert json.loads("".join(c.arguments_delta for c in calls)) == {"a": 1}
    assert got[-1] == ModelResponse(
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=3, completion_tokens=2, cached_tokens=1),
        model="scripted:inline",
    )


async def test_rounds_are_consumed_in_order_and_running_out_is_an_error() -> None:
    p = provider({"text": "one"}, {"text": "two"})
    assert [i for i in await items(p) if isinstance(i, TextChunk)] == [TextChunk(delta="one")]
    assert [i for i in await items(p) if isinstance(i, TextChunk)] == [TextChunk(delta="two")]
    with pytest.raises(ProviderError) as info:
        await items(p)
    assert info.value.code == "script_exhausted" and "loop: true" in info.value.message
    looping = provider({"text": "again"}, loop=True)
    for _ in range(3):
        assert isinstance((await items(looping))[-1], ModelResponse)


async def test_errors_hangs_and_raw_argument_text() -> None:
    with pytest.raises(ProviderError) as info:
        await items(provider({"text": "x", "error": {"code": "boom", "message": "it broke"}}))
    assert (info.value.code, info.value.message) == ("boom", "it broke")
    raw = await items(
        provider({"tool_calls": [{"id": "c", "name": "f", "arguments_text": "{oops"}]})
    )
    assert "".join(i.arguments_delta for i in raw if isinstance(i, ToolCallChunk)) == "{oops"
    with anyio.move_on_after(0.2) as scope:
        await items(provider({"text": "x", "hang": True}))
    assert scope.cancelled_caught


@pytest.mark.parametrize(
    ("violation", "responses", "last_is_response"),
    [("no_response", 0, False), ("chunk_after_response", 1, False), ("two_responses", 2, True)],
)
async def test_violations_break_the_contract_on_purpose(
    violation: str, responses: int, last_is_response: bool
) -> None:
    got = await items(provider({"text": "x", "violation": violation}))
    assert sum(isinstance(i, ModelResponse) for i in got) == responses
    assert isinstance(got[-1], ModelResponse) is last_is_response


async def test_providers_for_one_file_share_the_round_position(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rounds": [{"text": "first"}, {"text": "second"}]}))
    one, two = ScriptedProvider.for_path(str(path)), ScriptedProvider.for_path(str(path))
    assert next(i for i in await items(one) if isinstance(i, TextChunk)).delta == "first"
    assert next(i for i in await items(two) if isinstance(i, TextChunk)).delta == "second"
    assert one.info.route == f"scripted:{path}"


def test_bad_script_files_name_the_file_and_the_field(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as info:
        load_script(tmp_path / "missing.json")
    assert info.value.code == "script_not_found" and "missing.json" in info.value.message
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rounds": [{"txt": "typo"}]}))
    with pytest.raises(ProviderError) as info:
        load_script(bad)
    assert info.value.code == "invalid_script"
    assert "bad.json" in info.value.message and "txt" in info.value.message
