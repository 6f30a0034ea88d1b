"""Cache anchors: system prompt, last tool, transcript tail; moved with the request; none on
one-off requests; the 1-hour opt-in and the off switch — checked on the bodies the Anthropic
provider really sends."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.cache_shaping import (
    CachePolicy,
    cache_policy_from_env,
    place_anchors,
)
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import Message, TextPart, ThinkingBlock, ToolCall

from .fake_anthropic import Recorder, Stream, mock_transport, ok

pytestmark = pytest.mark.anyio

EPHEMERAL = {"type": "ephemeral"}


def tool(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=name, parameters_json='{"type":"object"}')


def user(text: str, id: str = "u") -> Message:
    return Message(id=id, role="user", content=(TextPart(text=text),))


REQUEST = ModelRequest(
    model="anthropic:m",
    system="You are careful.",
    messages=(
        user("read a.py", "u1"),
        Message(
            id="a1",
            role="assistant",
            thinking=(ThinkingBlock(text="hm", signature="s"),),
            tool_calls=(ToolCall(call_id="c1", name="read_file", arguments_json="{}"),),
        ),
        Message(id="r1", role="tool", content=(TextPart(text="x = 1"),), tool_call_id="c1"),
    ),
    tools=(tool("read_file"), tool("write_file")),
)


def body(request: ModelRequest = REQUEST, policy: CachePolicy | None = None) -> dict[str, Any]:
    config = AnthropicConfig(model="m", cache=policy or CachePolicy())
    return AnthropicProvider(config).body(request)


def anchors(data: Any, path: str = "") -> list[str]:
    """Paths of every block carrying `cache_control`."""
    found: list[str] = []
    if isinstance(data, dict):
        if "cache_control" in data:
            found.append(path)
        for key, value in data.items():
            found.extend(anchors(value, f"{path}.{key}"))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found.extend(anchors(value, f"{path}[{i}]"))
    return found


def test_three_anchors_sit_on_system_last_tool_and_transcript_tail() -> None:
    shaped = body()
    assert anchors(shaped) == [
        ".messages[2].content[0]",
        ".system[0]",
        ".tools[1]",
    ]
    assert shaped["system"][0]["cache_control"] == EPHEMERAL
    assert shaped["tools"][1]["name"] == "write_file"
    tail = shaped["messages"][-1]["content"][-1]
    assert tail["type"] == "tool_result" and tail["cache_control"] == EPHEMERAL


def test_anchors_move_when_tools_or_transcript_change() -> None:
    more = replace(
        REQUEST,
        tools=(*REQUEST.tools, tool("run")),
        messages=(*REQUEST.messages, user("thanks", "u2")),
    )
    shaped = body(more)
    assert anchors(shaped) == [".messages[2].content[1]", ".system[0]", ".tools[2]"]
    assert shaped["tools"][2]["name"] == "run"
    assert shaped["messages"][2]["content"][1]["text"] == "thanks"
    assert "cache_control" not in shaped["messages"][2]["content"][0]  # the old tail is free
    assert "cache_control" not in shaped["tools"][1]
    fewer = replace(REQUEST, tools=(tool("read_file"),))
    assert anchors(body(fewer)) == [".messages[2].content[0]", ".system[0]", ".tools[0]"]


def test_tail_anchor_skips_thinking_blocks() -> None:
    prefill = replace(REQUEST, messages=REQUEST.messages[:2])
    shaped = body(prefill)
    tail = shaped["messages"][-1]["content"]
    assert tail[0]["type"] == "thinking" and "cache_control" not in tail[0]
    assert tail[-1]["type"] == "tool_use" and tail[-1]["cache_control"] == EPHEMERAL


def test_one_off_requests_carry_no_anchor() -> None:
    assert anchors(body(replace(REQUEST, one_off=True))) == []


def test_off_switch_and_one_hour_ttl() -> None:
    assert anchors(body(policy=CachePolicy(enabled=False))) == []
    hour = body(policy=CachePolicy(ttl="1h"))
    assert hour["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert hour["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_no_system_and_no_tools_leave_only_the_tail() -> None:
    bare = ModelRequest(model="m", system="", messages=(user("hi"),))
    assert anchors(body(bare)) == [".messages[0].content[0]"]


def test_place_anchors_never_mutates_its_input() -> None:
    original = {
        "system": [{"type": "text", "text": "s"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"name": "t", "input_schema": {}}],
    }
    shaped = place_anchors(original, CachePolicy(), one_off=False)
    assert anchors(original) == []
    assert anchors(shaped) == [".system[0]", ".messages[0].content[0]", ".tools[0]"]


def test_policy_from_env() -> None:
    assert cache_policy_from_env({}) == CachePolicy()
    assert cache_policy_from_env({"STEERABLE_PROMPT_CACHE": "OFF"}).enabled is False
    assert cache_policy_from_env({"STEERABLE_PROMPT_CACHE_TTL": "1h"}).ttl == "1h"


async def test_the_sent_request_carries_the_anchors() -> None:
    rec = Recorder([ok(Stream().start().text("ok").stop())])
    provider = AnthropicProvider(
        AnthropicConfig(model="m", base_url="http://127.0.0.1:9"), transport=mock_transport(rec)
    )
    try:
        _ = [item async for item in provider.stream(REQUEST)]
        _ = [item async for item in provider.stream(replace(REQUEST, one_off=True))]
    finally:
        await provider.aclose()
    assert len(anchors(rec.requests[0])) == 3
    assert anchors(rec.requests[1]) == []
