"""Which models a command can reach: the router with every provider this build ships.

`build_router(model, ...)` registers the built-in `demo:` and `scripted:` providers, any
bridged agent's provider, and each HTTP adapter's own `register` (`HTTP_PROVIDERS`, imported
when the first route of its prefix resolves), then offers `model`, the `anthropic:` routes
(`anthropic_routes`) and the demo model. `model_env(settings)` is what the HTTP adapters
configure from: the provider settings overlaid with the credentials `login` stored.
A route that does not parse raises `ConfigError` with the route's own message.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.settings import current_settings
from steerable_bridge.runtime.agent_sessions.routing import (
    ModelRouter,
    ProviderFactory,
    RouteError,
    split_route,
)
from steerable_bridge.runtime.ports.model import ModelProvider

if TYPE_CHECKING:
    from steerable_bridge.adapters.llm.deadlines import CallDeadlines
    from steerable_bridge.commands.credentials import ModelEnv
    from steerable_bridge.commands.settings import Settings

__all__ = [
    "DEFAULT_MODEL",
    "HTTP_PROVIDERS",
    "anthropic_routes",
    "build_router",
    "model_env",
]

DEFAULT_MODEL = "demo:default"


def model_env(settings: Settings) -> ModelEnv:
    """What the HTTP model adapters configure from: the provider settings as variables,
    overlaid with the credentials `login` stored (`credentials.ModelEnv`)."""
    from steerable_bridge.commands.credentials import ModelEnv, credentials_path

    return ModelEnv(settings.providers.environ(), path=credentials_path(settings.paths.environ()))


def build_router(
    model: str,
    deadlines: CallDeadlines | None = None,
    env: ModelEnv | None = None,
    providers: Mapping[str, ProviderFactory] | None = None,
    settings: Settings | None = None,
) -> ModelRouter:
    """A router with every provider this build ships, offering `model` first; HTTP providers
    bound each call by `deadlines` (the defaults of `CallDeadlines` when None) and configure
    from `env` (the provider settings plus stored credentials, `model_env`, when None),
    which `router.refresh()` re-reads. `providers` adds factories by provider name (a
    bridged agent's route). `settings` (read from the environment when None) sets the demo
    model's pace."""
    settings = current_settings() if settings is None else settings
    env = model_env(settings) if env is None else env
    router = ModelRouter()
    router.on_refresh = env.reload
    pace = settings.agent.demo_pace_ms

    def demo(name: str) -> ModelProvider:
        from steerable_bridge.adapters.llm.demo import DemoProvider

        return DemoProvider(pace_ms=pace)

    def scripted(path: str) -> ModelProvider:
        from steerable_bridge.adapters.llm.scripted import ScriptedProvider

        return ScriptedProvider.for_path(path)

    router.register("demo", demo)
    router.register("scripted", scripted)
    for name, factory in (providers or {}).items():
        router.register(name, factory)
    _register_http(router, env, deadlines)
    try:
        split_route(model)
    except RouteError as err:
        raise ConfigError(err.message) from None
    router.offer(model)
    for route in anthropic_routes(env):
        router.offer(route)
    router.offer(DEFAULT_MODEL)
    return router


DEFAULT_ANTHROPIC_MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
"""Offered to editors when an Anthropic key is set and STEERABLE_ANTHROPIC_MODELS is not."""


def anthropic_routes(env: Mapping[str, str]) -> list[str]:
    """The `anthropic:` routes to offer for selection (ACP config option, `/model`).

    `STEERABLE_ANTHROPIC_MODELS` (comma-separated model names) when set; otherwise, once
    `ANTHROPIC_API_KEY` is set, the current Claude models; none without a key.
    """
    listed = env.get("STEERABLE_ANTHROPIC_MODELS")
    if listed is not None:
        names = [name.strip() for name in listed.split(",") if name.strip()]
    elif env.get("ANTHROPIC_API_KEY"):
        names = list(DEFAULT_ANTHROPIC_MODELS)
    else:
        names = []
    return [f"anthropic:{name}" for name in names]


HTTP_PROVIDERS = {
    "openai": "steerable_bridge.adapters.llm.openai_compat",
    "anthropic": "steerable_bridge.adapters.llm.anthropic",
    "openai-responses": "steerable_bridge.adapters.llm.openai_responses",
}
"""The HTTP model adapters by route prefix; each module's `register` offers that prefix."""


def _register_http(
    router: ModelRouter, env: Mapping[str, str], deadlines: CallDeadlines | None
) -> None:
    # Each adapter's own `register(router, env, deadlines)`, called when the first route of
    # its prefix resolves (`ModelRouter.on_first_use`): a start that uses none of them
    # imports none (~20 ms). The router keeps the provider built for a route (one pooled
    # HTTP client each) and closes it when the agent shuts down.
    for prefix, module in HTTP_PROVIDERS.items():
        router.on_first_use(prefix, partial(_register_adapter, module, router, env, deadlines))


def _register_adapter(
    module: str, router: ModelRouter, env: Mapping[str, str], deadlines: CallDeadlines | None
) -> None:
    importlib.import_module(module).register(router, env, deadlines)
