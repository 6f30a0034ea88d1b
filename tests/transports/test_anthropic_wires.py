"""The Anthropic adapter behind both real transports, against the fake API on 127.0.0.1:
ACP (`steerable-bridge acp` as a process) shows the answer, the thought and the cache
counters in `usage_update`, and names ANTHROPIC_API_KEY when the key is missing; AG-UI shows
them in RUN_FINISHED usage and keeps the thinking signature in the reasoning metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.adapters.llm.fake_anthropic import Recorder, Stream, ok, serve
from tests.transports.acp.harness import running
from tests.transports.agui.harness import agent_for, asgi_client, post, run_input, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def answer() -> Stream:
    stream = Stream().start(input_tokens=40, read=3000, created=200)
    return stream.thinking("Thinking ", "hard.", signature="sig-w").text("Forty", "-two.").stop()


async def test_acp_shows_answer_thought_and_cache_counters(tmp_path: Path) -> None:
    rec = Recorder([ok(answer())])
    async with serve(rec) as url:
        env = {"ANTHROPIC_BASE_URL": url}
        async with running(tmp_path, model="anthropic:claude-w", env=env) as run:
            await run.init()
            sid = await run.new()
            response = await run.prompt(sid, "six times seven?")
    client = run.client
    assert response.stop_reason == "end_turn"
    assert response.usage is not None
    assert (response.usage.cached_read_tokens, response.usage.cached_write_tokens) == (3000, 200)
    text = "".join(u.content.text for u in client.updates_of("agent_message_chunk"))
    thought = "".join(u.content.text for u in client.updates_of("agent_thought_chunk"))
    assert (text, thought) == ("Forty-two.", "Thinking hard.")
    (usage,) = client.updates_of("usage_update")
    assert (usage.used, usage.size) == (3240 + 5, 200_000)
    meta = usage.field_meta["steerable"]
    assert (meta["cache_read_tokens"], meta["cache_creation_tokens"]) == (3000, 200)
    assert rec.requests[0]["model"] == "claude-w"


async def test_acp_names_the_anthropic_key_when_it_is_missing(tmp_path: Path) -> None:
    env = {"ANTHROPIC_BASE_URL": "https://api.anthropic.example"}
    async with running(tmp_path, model="anthropic:claude-w", env=env) as run:
        init = await run.init()
        with pytest.raises(RequestError) as error:
            await run.new()
    assert [m.id for m in init.auth_methods] == ["stored-credentials"]
    assert error.value.data["variable"] == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY" in str(error.value)


async def test_agui_shows_cache_usage_and_keeps_the_signature() -> None:
    rec = Recorder([ok(answer())])
    async with serve(rec) as url:
        provider = AnthropicProvider(AnthropicConfig(model="claude-w", base_url=url))
        app = create_app(LocalPort(agent_for(provider)))
        try:
            async with asgi_client(app) as client:
                _, wire = await post(client, run_input("t1", "r1", [user("m1", "hi")]))
        finally:
            await provider.aclose()
    finished = next(f for f in wire if f["type"] == "RUN_FINISHED")
    (usage,) = finished["usage"]
    assert (usage["cachedInputTokens"], usage["cacheWriteInputTokens"]) == (3000, 200)
    end = next(f for f in wire if f["type"] == "REASONING_MESSAGE_END")
    assert end["metadata"]["steerable"]["signature"] == "sig-w"
    text = "".join(f["delta"] for f in wire if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Forty-two."
