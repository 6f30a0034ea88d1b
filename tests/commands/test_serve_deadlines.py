"""A model server that never finishes, through the real `serve`: the run ends with RUN_ERROR
`model_timeout` (or, under the soft timeout, a wrap-up answer) instead of staying open."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .serve_child import clean_env, started
from .stalling_model import ANSWER, serve_in_thread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[str, dict[str, int], list[str]]]:
    base, seen, closed, stop = serve_in_thread()
    try:
        yield base, seen, closed
    finally:
        stop()


def run(base: str, thread: str) -> list[dict[str, Any]]:
    body = {
        "threadId": thread,
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    }
    with httpx.Client(base_url=base, timeout=60) as client:
        reply = client.post("/agent", json=body)
    return [
        json.loads(b.partition("data: ")[2])
        for b in reply.text.split("\n\n")
        if b.startswith(("data: ", "id: "))
    ]


def serve_args(route: str, *options: str) -> list[str]:
    return ["--model", f"openai:{route}", *options]


def test_sse_comments_for_ever_end_the_run_with_model_timeout(
    model: tuple[str, dict[str, int], list[str]],
) -> None:
    url, _, closed = model
    env = clean_env(STEERABLE_BASE_URL=url)
    args = serve_args("comments", "--model-deadline", "2", "--quality", "off")
    with started(args, env) as (base, _):
        frames = run(base, "comments")
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == "model_timeout"
    assert "--model-deadline" in frames[-1]["message"]
    for _ in range(100):  # the call's response was closed: the server saw its stream end
        if "comments" in closed:
            break
        time.sleep(0.05)
    assert "comments" in closed


def test_one_byte_a_second_ends_the_run_at_the_idle_deadline(
    model: tuple[str, dict[str, int], list[str]],
) -> None:
    url, _, _ = model
    env = clean_env(STEERABLE_BASE_URL=url, STEERABLE_MODEL_IDLE_TIMEOUT="2")
    with started(serve_args("dribble", "--quality", "off"), env) as (base, _):
        frames = run(base, "dribble")
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == "model_timeout"
    assert "STEERABLE_MODEL_IDLE_TIMEOUT" in frames[-1]["message"]


def test_under_the_soft_timeout_a_stalled_call_wraps_the_turn_up(
    model: tuple[str, dict[str, int], list[str]],
) -> None:
    url, seen, _ = model
    env = clean_env(STEERABLE_BASE_URL=url)
    args = serve_args("stall-once", "--model-idle-timeout", "2", "--quality", "on")
    with started(args, env) as (base, _):
        frames = run(base, "stall-once")
    assert frames[-1]["type"] == "RUN_FINISHED"
    text = "".join(f.get("delta", "") for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert ANSWER in text
    actions = [
        f["value"] for f in frames if f["type"] == "CUSTOM" and f["name"] == "steerable.hook_action"
    ]
    assert [(a["hook"], a["action"]) for a in actions] == [("soft_timeout", "wrap_up")]
    assert seen["stall-once"] == 2
