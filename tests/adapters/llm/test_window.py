"""Context window discovery: each server's way of saying it, the name table, once per route."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from steerable_bridge.adapters.llm import openai_compat
from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.adapters.llm.window import WindowCache, discover_window, known_window
from steerable_bridge.runtime.ports.model import context_window

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:9/v1"


def server(routes: dict[tuple[str, str], Any], seen: list[str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(404, json={"error": "not found"})
        return httpx.Response(200, content=json.dumps(answer).encode())

    return httpx.MockTransport(handler)


async def ask(routes: dict[tuple[str, str], Any], model: str) -> tuple[int | None, list[str]]:
    seen: list[str] = []
    async with httpx.AsyncClient(transport=server(routes, seen)) as client:
        return await discover_window(client, BASE, model), seen


async def test_vllm_reports_max_model_len_per_model() -> None:
    models = {"data": [{"id": "other", "max_model_len": 1}, {"id": "qwen", "max_model_len": 32768}]}
    window, seen = await ask({("GET", "/v1/models"): models}, "qwen")
    assert window == 32768 and seen == ["GET /v1/models"]


async def test_llama_cpp_reports_n_ctx_in_props() -> None:
    props = {"default_generation_settings": {"n_ctx": 4096}}
    openai_models = {"data": [{"id": "local", "object": "model"}]}
    window, seen = await ask({("GET", "/v1/models"): openai_models, ("GET", "/props"): props}, "x")
    assert window == 4096 and seen == ["GET /v1/models", "GET /props"]


async def test_ollama_num_ctx_wins_else_its_default() -> None:
    show = {"parameters": "stop <eot>\nnum_ctx 16384", "model_info": {"llama.context_length": 1}}
    window, _ = await ask({("POST", "/api/show"): show}, "llama3.2")
    assert window == 16384
    plain = {"model_info": {"qwen2.context_length": 32768}}
    window, _ = await ask({("POST", "/api/show"): plain}, "qwen2.5")
    assert window == 4096  # what Ollama actually gives a model without num_ctx


async def test_lm_studio_reports_the_loaded_context() -> None:
    answer = {"id": "m", "max_context_length": 32768, "loaded_context_length": 8192}
    window, _ = await ask({("GET", "/api/v0/models/m"): answer}, "m")
    assert window == 8192


async def test_silent_servers_fall_back_to_the_name_table_or_unknown() -> None:
    assert (await ask({}, "gpt-4o-mini"))[0] == 128_000
    assert (await ask({}, "meta-llama/llama-3.1-8b-instruct"))[0] == 131_072
    assert (await ask({}, "my-own-finetune"))[0] is None
    assert known_window("GPT-4.1-mini") == 1_047_576


async def test_the_provider_asks_once_per_route_and_the_env_setting_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openai_compat, "WINDOWS", WindowCache())
    seen: list[str] = []
    transport = server(
        {("GET", "/v1/models"): {"data": [{"id": "m", "max_model_len": 2048}]}}, seen
    )
    first = OpenAICompatProvider(OpenAIConfig(model="m", base_url=BASE), transport=transport)
    second = OpenAICompatProvider(OpenAIConfig(model="m", base_url=BASE), transport=transport)
    assert first.info.context_window is None
    assert await context_window(first) == 2048 and await context_window(second) == 2048
    assert first.info.context_window == 2048  # usage displays see it too
    assert seen == ["GET /v1/models"]
    fixed = OpenAICompatProvider(
        OpenAIConfig(model="m", base_url=BASE, context_window=999), transport=transport
    )
    assert await context_window(fixed) == 999 and len(seen) == 1
    await first.aclose()
    await second.aclose()
    await fixed.aclose()


async def test_a_window_from_the_name_table_is_marked_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from steerable_bridge.adapters.llm.window import probe_window

    seen: list[str] = []
    async with httpx.AsyncClient(transport=server({}, seen)) as client:
        assert await probe_window(client, BASE, "gpt-4o-mini") == (128_000, True)
        assert await probe_window(client, BASE, "my-own-finetune") == (None, False)
    monkeypatch.setattr(openai_compat, "WINDOWS", WindowCache())
    silent = OpenAICompatProvider(
        OpenAIConfig(model="gpt-4o", base_url=BASE), transport=server({}, seen)
    )
    assert await context_window(silent) == 128_000
    assert silent.info.window_guessed
    models = {"data": [{"id": "m", "max_model_len": 2048}]}
    told = OpenAICompatProvider(
        OpenAIConfig(model="m", base_url=BASE),
        transport=server({("GET", "/v1/models"): models}, seen),
    )
    assert await context_window(told) == 2048 and not told.info.window_guessed
    await silent.aclose()
    await told.aclose()


@pytest.mark.parametrize("text", ["lots", "0", "-5", "32k", "1.5"])
def test_a_bad_window_setting_names_the_variable_and_the_fix(text: str) -> None:
    from steerable_bridge.adapters.llm import anthropic
    from steerable_bridge.adapters.llm.window import window_from_env
    from steerable_bridge.runtime.agent_sessions.routing import RouteError

    env = {"STEERABLE_CONTEXT_WINDOW": text}
    with pytest.raises(RouteError) as info:
        window_from_env(env)
    assert info.value.code == "invalid_setting"
    assert info.value.message == (
        f"STEERABLE_CONTEXT_WINDOW={text!r} is not a whole number of tokens above zero; set"
        " STEERABLE_CONTEXT_WINDOW to the model's context window (such as 131072), or unset it"
        " for the provider's default"
    )
    assert info.value.remedy and info.value.remedy.startswith("set STEERABLE_CONTEXT_WINDOW")
    for config_from_env in (openai_compat.config_from_env, anthropic.config_from_env):
        with pytest.raises(RouteError) as same:
            config_from_env("m", env)
        assert same.value.message == info.value.message


def test_a_good_window_setting_reaches_both_providers() -> None:
    from steerable_bridge.adapters.llm import anthropic
    from steerable_bridge.adapters.llm.window import window_from_env

    assert window_from_env({}) is None
    assert window_from_env({"STEERABLE_CONTEXT_WINDOW": "  "}) is None
    assert window_from_env({"STEERABLE_CONTEXT_WINDOW": " 32768 "}) == 32768
    env = {"STEERABLE_CONTEXT_WINDOW": "65536"}
    assert openai_compat.config_from_env("m", env).context_window == 65536
    assert anthropic.config_from_env("m", env).context_window == 65536
    assert openai_compat.config_from_env("m", {}).context_window is None
    assert anthropic.config_from_env("m", {}).context_window == 200_000
