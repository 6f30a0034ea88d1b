"""The model routes offered to editors: the chosen one, configured Anthropic routes, demo."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from acp import schema as acp

from steerable_bridge.adapters.llm.anthropic import AnthropicProvider
from steerable_bridge.adapters.llm.deadlines import CallDeadlines
from steerable_bridge.adapters.llm.http_stream import HttpStreamProvider
from steerable_bridge.commands.credentials import ModelEnv
from steerable_bridge.commands.model_routes import HTTP_PROVIDERS, anthropic_routes, build_router
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from tests.transports.acp.harness import running


def test_anthropic_routes_follow_the_key_and_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    assert anthropic_routes({}) == []
    with_key = anthropic_routes({"ANTHROPIC_API_KEY": "k"})
    assert "anthropic:claude-sonnet-4-5" in with_key
    listed = {"ANTHROPIC_API_KEY": "k", "STEERABLE_ANTHROPIC_MODELS": "claude-a, claude-b,"}
    assert anthropic_routes(listed) == ["anthropic:claude-a", "anthropic:claude-b"]
    assert anthropic_routes({"STEERABLE_ANTHROPIC_MODELS": "claude-a"}) == ["anthropic:claude-a"]

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("STEERABLE_ANTHROPIC_MODELS", "claude-a")
    router = build_router("openai:gpt-x")
    assert router.routes == ["openai:gpt-x", "anthropic:claude-a", "demo:default"]
    provider = router.resolve("anthropic:claude-a")
    assert isinstance(provider, AnthropicProvider)
    assert provider.info.route == "anthropic:claude-a"
    assert provider.info.needs_api_key_env is None


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_acp_offers_configured_anthropic_routes_in_config_and_slash_model(
    tmp_path: Path,
) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "STEERABLE_ANTHROPIC_MODELS": "claude-a,claude-b"}
    async with running(tmp_path, [{"text": "ok"}], env=env) as run:
        await run.init()
        new = await run.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = new.session_id
        await run.prompt(sid, "/model")
        await run.prompt(sid, "/model anthropic:claude-b")
    assert new.config_options is not None
    option = new.config_options[0]
    assert isinstance(option, acp.SessionConfigOptionSelect)
    values = [o.value for o in option.options]
    assert values[1:] == ["anthropic:claude-a", "anthropic:claude-b", "demo:default"]
    chunks = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert "anthropic:claude-a" in chunks[0] and "anthropic:claude-b" in chunks[0]
    assert "now `anthropic:claude-b`" in chunks[1]


@pytest.mark.parametrize(("prefix", "module"), sorted(HTTP_PROVIDERS.items()))
def test_each_http_provider_is_built_by_its_own_module_with_the_deadlines(
    prefix: str, module: str, tmp_path: Path
) -> None:
    adapter = importlib.import_module(module)
    own = ModelRouter()
    adapter.register(own)  # the module's register offers the prefix the CLI lists it under
    env = ModelEnv(
        env={
            "STEERABLE_BASE_URL": "http://127.0.0.1:9/v1",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "XDG_CONFIG_HOME": str(tmp_path),
        }
    )
    deadlines = CallDeadlines(call_s=900, idle_s=600)
    provider = build_router(f"{prefix}:m", deadlines, env).resolve(f"{prefix}:m")
    assert type(provider) is type(own.resolve(f"{prefix}:m"))
    assert isinstance(provider, HttpStreamProvider)
    assert provider.info.route == f"{prefix}:m"
    assert provider.info.needs_api_key_env is None  # configured from `env`: a loopback URL
    assert provider.config.deadlines == deadlines
    assert provider.config.read_timeout_s == 600
