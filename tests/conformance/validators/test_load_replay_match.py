"""`agent.session.load` compares the replay with the live turn, tolerating live-only notices.

codex-acp streams "Model metadata for `X` not found ..." as an agent_message_chunk before the
answer, and its history keeps only the answer: the replay still carries all of the model's
content, so `check acp` must not fail it, but it must fail a replay that lost or changed any
of that content.
"""

from __future__ import annotations

from steerable_bridge.conformance.validators.agent_probes import live_only_chunks

NOTICE = "Model metadata for `fake-model` not found. Defaulting to fallback metadata."
ANSWER = ["Hello f", "rom the", " fake m", "odel."]


def test_an_exact_replay_leaves_nothing_out() -> None:
    assert live_only_chunks("Hello from the fake model.", ANSWER) == ""
    assert live_only_chunks(" Hello from the fake model.\n", ANSWER) == ""


def test_a_notice_only_the_live_turn_streamed_is_tolerated_and_named() -> None:
    assert live_only_chunks("Hello from the fake model.", [NOTICE, *ANSWER]) == NOTICE
    assert live_only_chunks("Hello from the fake model.", [*ANSWER, NOTICE]) == NOTICE


def test_a_replay_that_lost_or_changed_content_differs() -> None:
    assert live_only_chunks("", [NOTICE, *ANSWER]) is None
    assert live_only_chunks("Hello from the fake", ANSWER) is None  # cut inside a chunk
    assert live_only_chunks("from the fake model.", ANSWER) is None  # lost "Hello "
    assert live_only_chunks("Hello from a fake model.", [NOTICE, *ANSWER]) is None
