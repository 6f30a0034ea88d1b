"""Model routing: an explicit `provider:model` route resolves to one provider, or fails.

Adapters register a factory per provider name (`demo`, `scripted`, `openai`); a route like
`openai:gpt-4o-mini` goes to the `openai` factory with model name `gpt-4o-mini`. A route
whose provider is unknown, or whose factory refuses it, raises `RouteError` before the loop
logs anything — there is no silent fallback to another model.
"""

from __future__ import annotations

from collections.abc import Callable

from steerable_bridge.runtime.model import ModelProvider

__all__ = ["ModelRouter", "ProviderFactory", "RouteError", "split_route"]

ProviderFactory = Callable[[str], ModelProvider]


class RouteError(Exception):
    """A model route that cannot be used; `message` names the remedy."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def split_route(route: str) -> tuple[str, str]:
    """`"openai:gpt-4o"` → `("openai", "gpt-4o")`; a bare provider gets model `default`."""
    provider, sep, model = route.partition(":")
    if not provider:
        raise RouteError("invalid_route", f"model route {route!r} must look like provider:model")
    return provider, (model if sep and model else "default")


class ModelRouter:
    """Factories by provider name, plus the routes offered to users for selection."""

    def __init__(self) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self.routes: list[str] = []

    def register(self, provider: str, factory: ProviderFactory) -> None:
        if provider in self._factories:
            raise ValueError(f"provider {provider!r} is already registered")
        self._factories[provider] = factory

    def offer(self, route: str) -> None:
        """Add a route to the list users may pick from (ACP config option, `/model`)."""
        if route not in self.routes:
            self.routes.append(route)

    def resolve(self, route: str) -> ModelProvider:
        provider, model = split_route(route)
        factory = self._factories.get(provider)
        if factory is None:
            known = ", ".join(sorted(self._factories)) or "none"
            raise RouteError(
                "unknown_provider",
                f"no model provider named {provider!r} (route {route!r}); known providers: {known}",
            )
        return factory(model)
