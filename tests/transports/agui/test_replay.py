"""A thread whose session compacted, reloaded by a restarted server: its MESSAGES_SNAPSHOT is
still the whole conversation, and the messages the client sends back are recognised, not
taken as new ones (nor is the thread sent to a client that sent all of it back) —
compaction only shortens what the model sees."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import asgi_client, post, run_input, types, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PROMPTS = [f"question {n}: tell me about topic {n}" for n in range(1, 5)]
ANSWERS = [f"Answer {n}. " + f"topic {n} has many words to it. " * 16 for n in range(1, 5)]
SUMMARY = {"text": "Four topics were asked about."}


def _snapshot(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = [f for f in wire if f["type"] == "MESSAGES_SNAPSHOT"]
    assert found, types(wire)
    return [m for m in found[-1]["messages"] if m["role"] in ("user", "assistant")]


async def test_a_restarted_server_sends_the_whole_compacted_thread() -> None:
    store = MemoryStore()
    rounds = [{"text": text, "chunk_size": 7} for text in ANSWERS]
    provider = scripted(*rounds, context_window=400, summary_rounds=[SUMMARY] * 4)
    held: list[dict[str, Any]] = []
    async with asgi_client(create_app(LocalPort(make_agent(provider, store=store)))) as client:
        for n, prompt in enumerate(PROMPTS):  # each time only the new message: the client
            _, wire = await post(client, run_input("t1", f"r{n}", [user(f"u{n}", prompt)]))
            assert types(wire)[-1] == "RUN_FINISHED"
            held = _snapshot(wire)  # lacks the thread, so it gets all of it every time
    logged = await store.read("t1")
    assert any(isinstance(e, ev.Compaction) and e.scope == "history" for e in logged)

    ids = iter(range(10**6))  # the restarted server's ids must not repeat the first one's
    restarted = make_agent(scripted({"text": "Fifth."}, {"text": "Sixth."}), store=store)
    loop = replace(restarted.config.loop, new_id=lambda prefix: f"{prefix}_b{next(ids)}")
    restarted.config = replace(restarted.config, loop=loop)
    async with asgi_client(create_app(LocalPort(restarted))) as client:
        _, wire = await post(client, run_input("t1", "r5", [*held, user("u5", "and now?")]))
        assert types(wire)[-1] == "RUN_FINISHED"
        assert "MESSAGES_SNAPSHOT" not in types(wire)  # it sent the whole thread back
        _, wire = await post(client, run_input("t1", "r6", [user("u6", "and then?")]))
    assert types(wire)[-1] == "RUN_FINISHED"
    messages = _snapshot(wire)
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [*PROMPTS, "and now?", "and then?"]
    answers = [m["content"] for m in messages if m["role"] == "assistant"]
    assert answers == [*ANSWERS, "Fifth.", "Sixth."]
    said = [e for e in await store.read("t1") if isinstance(e, ev.UserMessage)]
    assert len(said) == 6  # the client's earlier messages were known, not logged again
