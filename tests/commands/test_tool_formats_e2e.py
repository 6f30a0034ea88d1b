"""Text-written calls in the formats of today's open models, and reasoning written as text,
end to end: `steerable-bridge acp` and `serve` against a local OpenAI-compatible server whose
model writes GLM, Kimi, harmony, Qwen3-Coder, Seed-OSS, Mistral v11, bare-JSON or pythonic
calls in 3-character deltas (`model_server.FORMATS`), or thinks in `<think>` / harmony
channels before answering (`model_server.THINKING`).

What a user must see: the call runs and its result reaches the model, not one character of
markup in the answer, and the reasoning on the reasoning channel (ACP `agent_thought_chunk`,
AG-UI `REASONING_*`), never in the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import schema as acp

from .model_server import FORMATS, THINKING, serve_in_thread
from .test_quality_e2e import FILE_TEXT, _acp_turn, _Client, _run, _serve

pytestmark = pytest.mark.slow

MARKUP = ("<tool_call>", "<arg_", "<|", "<function", "<parameter", "<seed:", "<think>",
          "</think>", "[TOOL_CALLS]", '"arguments"', "[read_file(", "read_file")  # fmt: skip


@pytest.fixture
def model_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    base, requests, stop = serve_in_thread()
    try:
        yield base, requests
    finally:
        stop()


class _Thoughts(_Client):
    """Also records the thought chunks an editor shows apart from the answer."""

    def __init__(self) -> None:
        super().__init__()
        self.thoughts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentThoughtChunk):
            self.thoughts.append(update.content.text)
        await super().session_update(session_id, update, **kwargs)


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", ["glm", "harmony", "qwen3coder", "mistral", "bare_json"])
async def test_acp_runs_each_format_and_shows_no_markup(
    key: str, tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, requests = model_server
    client = _Thoughts()
    _, stop_reason = await _acp_turn(tmp_path, base, f"fmt-{key}", client)
    _, shown_before, reasoning = FORMATS[key]
    shown = "".join(client.text)
    assert stop_reason == "end_turn"
    assert shown == f"{shown_before}The file says: {FILE_TEXT}"
    assert not any(marker in shown for marker in MARKUP)
    assert "".join(client.thoughts) == reasoning
    (call_id,) = client.tools
    assert client.statuses[call_id][-1] == "completed"
    assert FILE_TEXT in json.dumps(requests[-1]["messages"])


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", sorted(THINKING))
async def test_acp_shows_reasoning_written_as_text_as_thoughts(
    key: str, tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, _ = model_server
    client = _Thoughts()
    _, stop_reason = await _acp_turn(tmp_path, base, f"think-{key}", client)
    _, shown, reasoning = THINKING[key]
    assert stop_reason == "end_turn"
    assert "".join(client.text) == shown
    assert "".join(client.thoughts) == reasoning


def _serve_frames(tmp_path: Path, base: str, model: str) -> list[dict[str, Any]]:
    process = _serve(tmp_path, base, model)
    try:
        return _run(process)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _reasoning(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "REASONING_MESSAGE_CONTENT")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", ["kimi", "seed", "pythonic", "harmony"])
def test_serve_runs_each_format_and_shows_no_markup(
    key: str, tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, requests = model_server
    frames = _serve_frames(tmp_path, base, f"fmt-{key}")
    _, shown_before, reasoning = FORMATS[key]
    shown = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == f"{shown_before}The file says: {FILE_TEXT}"
    assert not any(marker in shown for marker in MARKUP)
    assert _reasoning(frames) == reasoning
    starts = [f for f in frames if f["type"] == "TOOL_CALL_START"]
    assert [f["toolCallName"] for f in starts] == ["read_file"]
    results = [f for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert FILE_TEXT in results[0]["content"]
    assert frames[-1]["type"] == "RUN_FINISHED"
    second = json.dumps(requests[-1]["messages"])
    assert reasoning == "" or reasoning not in second  # reasoning is not sent back


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", sorted(THINKING))
def test_serve_shows_reasoning_written_as_text_as_reasoning(
    key: str, tmp_path: Path, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    base, _ = model_server
    frames = _serve_frames(tmp_path, base, f"think-{key}")
    _, shown, reasoning = THINKING[key]
    assert "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT") == shown
    assert _reasoning(frames) == reasoning
    assert frames[-1]["type"] == "RUN_FINISHED"
