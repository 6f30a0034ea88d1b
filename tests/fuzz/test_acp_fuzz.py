"""Hostile ACP frames against the real `steerable-bridge acp`: it never dies, never answers
with anything but strict JSON, and answers each known-bad input with the expected code.

The corpus (corpus/acp_frames.json) holds the exact frames that used to kill the agent or
get a wrong answer; the property test draws batches of frames from `strategies.frames` with
a fixed seed (a short profile: bench/fuzz.py runs the long one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import frames
from tests.fuzz.targets import TRACEBACK, AcpTarget

CORPUS = json.loads((Path(__file__).parent / "corpus" / "acp_frames.json").read_text())

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def agent() -> Iterator[AcpTarget]:
    with AcpTarget() as target:
        yield target
        assert target.unanswered() == {}
        assert target.process.poll() is None, "the agent died"
        stderr = target.stderr()
        assert TRACEBACK not in stderr, stderr[-3000:]


def _frame(entry: dict[str, Any]) -> bytes:
    return bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode()


@pytest.mark.parametrize("entry", CORPUS, ids=[e["name"] for e in CORPUS])
def test_each_known_bad_frame_gets_its_answer(agent: AcpTarget, entry: dict[str, Any]) -> None:
    problems = agent.send_batch([_frame(entry)])
    assert problems == []
    answers = [a for a in agent.answers if "method" not in a]
    expect = entry["expect"]
    if expect is None:
        assert answers == []
        return
    assert len(answers) == 1, answers
    (answer,) = answers
    assert answer["id"] == expect["id"]
    if expect.get("result"):
        assert "result" in answer, answer
    else:
        assert answer["error"]["code"] == expect["code"], answer


def test_an_oversized_frame_is_refused_naming_the_limit(agent: AcpTarget) -> None:
    from steerable_bridge.transports.acp.frames import MAX_FRAME_BYTES

    big = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"'
        + b"a" * (MAX_FRAME_BYTES + 10)
        + b'"}}'
    )
    assert agent.send_batch([big]) == []
    (answer,) = agent.answers
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert str(MAX_FRAME_BYTES) in answer["error"]["message"]


def test_the_agent_still_works_after_the_corpus(agent: AcpTarget) -> None:
    init = b'{"jsonrpc":"2.0","id":"after","method":"initialize","params":{"protocolVersion":1}}'
    assert agent.send_batch([init]) == []
    assert [a["result"]["protocolVersion"] for a in agent.answers] == [1]


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batch=st.lists(frames(), min_size=1, max_size=25))
def test_fuzzed_frames_never_kill_the_agent_or_break_json(
    agent: AcpTarget, batch: list[bytes]
) -> None:
    assert agent.send_batch(batch) == []
