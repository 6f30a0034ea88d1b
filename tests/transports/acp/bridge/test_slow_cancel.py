"""Stop, then a new message at once, behind `serve --acp-agent` whose agent is slow to stop.

A user who presses stop and sends the next message right away must get that run, not a
409: the disconnected run is still cancelling — the child agent (`slow_cancel_agent.py`)
ends its cancelled prompt only seconds after `session/cancel`, as codex-acp did under load
— and the new request waits for it to let go of the thread (bounded) instead of being
refused.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.transports.acp.bridge.harness import run_input, serving, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

AGENT = Path(__file__).with_name("slow_cancel_agent.py")
CANCEL_TAKES_S = 3.0
"""Longer than the 1 s a new request used to wait before it was answered 409."""


def test_a_new_message_right_after_a_stop_waits_for_the_slow_cancel_and_runs(
    tmp_path: Path,
) -> None:
    command = shlex.join([sys.executable, str(AGENT), str(CANCEL_TAKES_S)])
    with serving(["--storage", "memory"], command) as bridge:
        for event in bridge.stream(run_input("t1", "r1", "long")):
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                break  # the user pressed stop: leaving the stream cancels the turn
        events = bridge.run(run_input("t1", "r2", "short"))  # asserts a 200 stream
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == "tick 0 "
