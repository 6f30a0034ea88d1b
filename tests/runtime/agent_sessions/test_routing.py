"""Model routing: explicit routes resolve or fail before anything is logged."""

from __future__ import annotations

import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter, RouteError, split_route
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from tests.runtime.harness import make_agent, scripted


def test_split_route() -> None:
    assert split_route("openai:gpt-4o") == ("openai", "gpt-4o")
    assert split_route("scripted:/tmp/a:b.json") == ("scripted", "/tmp/a:b.json")
    assert split_route("demo") == ("demo", "default")
    with pytest.raises(RouteError) as info:
        split_route(":model")
    assert info.value.code == "invalid_route"


def test_a_route_goes_to_its_provider_factory_with_the_model_name() -> None:
    router = ModelRouter()
    made: list[str] = []

    def factory(name: str) -> ModelProvider:
        made.append(name)
        return DemoProvider(pace_ms=0)

    router.register("demo", factory)
    router.register("other", lambda name: DemoProvider(pace_ms=0))
    assert isinstance(router.resolve("demo:small"), DemoProvider)
    assert made == ["small"]
    with pytest.raises(ValueError, match="already registered"):
        router.register("demo", factory)


def test_an_unknown_provider_is_an_error_listing_the_known_ones_not_a_fallback() -> None:
    router = ModelRouter()
    router.register("demo", lambda name: DemoProvider(pace_ms=0))
    with pytest.raises(RouteError) as info:
        router.resolve("anthropic:claude")
    assert info.value.code == "unknown_provider"
    assert "'anthropic'" in info.value.message and "known providers: demo" in info.value.message


def test_a_provider_registered_on_first_use_loads_when_its_first_route_resolves() -> None:
    router = ModelRouter()
    loads: list[str] = []
    failing = [True]

    def load() -> None:
        loads.append("lazy")
        if failing[0]:
            raise ImportError("not installed")
        router.register("lazy", lambda name: DemoProvider(pace_ms=0))

    router.on_first_use("lazy", load)
    with pytest.raises(ValueError, match="already registered"):
        router.register("lazy", lambda name: DemoProvider(pace_ms=0))
    with pytest.raises(RouteError, match="known providers: lazy"):
        router.resolve("other:m")
    assert loads == []  # naming it among the known ones loads nothing
    with pytest.raises(ImportError):
        router.resolve("lazy:m")
    failing[0] = False  # a failed load is tried again by the next resolve
    assert isinstance(router.resolve("lazy:a"), DemoProvider)
    assert isinstance(router.resolve("lazy:b"), DemoProvider)
    assert loads == ["lazy", "lazy"]


@pytest.mark.anyio
async def test_a_bad_route_fails_before_the_session_logs_anything() -> None:
    agent = make_agent(scripted({"text": "never"}))
    session = await agent.new_session("/work", model="missing:model")
    with pytest.raises(RouteError):
        await session.prompt(TurnInput(content=(TextPart(text="hi"),)))
    assert len(session.log) == 0
    assert await agent.store.read(session.id) == []
    assert not session.running  # the session can be used again


@pytest.mark.anyio
async def test_a_factory_refusing_its_model_also_fails_before_logging() -> None:
    def refuse(name: str) -> ModelProvider:
        raise RouteError("missing_model", f"no model {name!r}; use --model refusing:NAME")

    agent = make_agent(scripted({"text": "never"}))
    agent.router.register("refusing", refuse)
    session = await agent.new_session("/work", model="refusing:x")
    with pytest.raises(RouteError, match="use --model"):
        await session.prompt(TurnInput(content=(TextPart(text="hi"),)))
    assert len(session.log) == 0


@pytest.mark.anyio
async def test_refresh_rereads_keys_and_rebuilds_only_the_providers_that_lacked_one() -> None:
    from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig

    keys: dict[str, str] = {}
    router = ModelRouter()
    router.register("demo", lambda name: DemoProvider(pace_ms=0))
    router.register(
        "openai", lambda name: OpenAICompatProvider(OpenAIConfig(model=name, api_key=keys.get("k")))
    )
    demo, keyless = router.resolve("demo:x"), router.resolve("openai:m")
    assert keyless.info.needs_api_key_env == "STEERABLE_API_KEY"
    router.on_refresh = lambda: keys.update(k="sk-new")  # what a login wrote, re-read
    await router.refresh()
    rebuilt = router.resolve("openai:m")
    assert rebuilt is not keyless and rebuilt.info.needs_api_key_env is None
    assert router.resolve("demo:x") is demo  # providers that had what they need are kept
    await router.aclose()
