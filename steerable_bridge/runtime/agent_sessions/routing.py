"""Model routing: an explicit `provider:model` route resolves to one provider, or fails.

Adapters register a factory per provider name (`demo`, `scripted`, `openai`); a route like
`openai:gpt-4o-mini` goes to the `openai` factory with model name `gpt-4o-mini`. A route
whose provider is unknown, or whose factory refuses it, raises `RouteError` before the loop
logs anything — there is no silent fallback to another model. A provider whose adapter is
costly to import (the HTTP ones) can be registered `on_first_use(name, load)`: `load()` runs
when a route of `name` first resolves and registers the factory itself (the adapter's own
`register(router, ...)`), so a start that never uses it never imports it.

A router builds each route's provider once and keeps it: every later `resolve` of that
route returns the same provider, so whatever it holds (an HTTP client with its connection
pool and TLS context) is set up once per process, not once per step. `aclose()` closes
every provider that has an `aclose()`; the agent calls it when it shuts down. `refresh()`
re-reads where keys come from (the `on_refresh` hook the command sets: stored credentials)
and forgets the providers that were built without a key they need, so a key saved after
start-up (`steerable-bridge login`) is used by the next `resolve`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.model import ModelProvider

__all__ = ["ModelRouter", "ProviderFactory", "RouteError", "split_route"]

ProviderFactory = Callable[[str], ModelProvider]

log = logging.getLogger(__name__)


class RouteError(CodedError):
    """A model route that cannot be used; `message` names the remedy."""


def split_route(route: str) -> tuple[str, str]:
    """`"openai:gpt-4o"` → `("openai", "gpt-4o")`; a bare provider gets model `default`."""
    provider, sep, model = route.partition(":")
    if not provider:
        raise RouteError("invalid_route", f"model route {route!r} must look like provider:model")
    return provider, (model if sep and model else "default")


class ModelRouter:
    """Factories by provider name, the providers built so far (one per route), and the
    routes offered to users for selection."""

    def __init__(self) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self._deferred: dict[str, Callable[[], None]] = {}
        self._providers: dict[str, ModelProvider] = {}
        self.routes: list[str] = []
        self.on_refresh: Callable[[], None] | None = None
        """Called by `refresh()` before it forgets keyless providers (re-reads credentials)."""

    def register(self, provider: str, factory: ProviderFactory) -> None:
        if provider in self._factories or provider in self._deferred:
            raise ValueError(f"provider {provider!r} is already registered")
        self._factories[provider] = factory

    def on_first_use(self, provider: str, load: Callable[[], None]) -> None:
        """Run `load()` when a route of `provider` first resolves; it must `register` the
        provider's factory (an adapter's `register(router, ...)`, imported there)."""
        if provider in self._factories or provider in self._deferred:
            raise ValueError(f"provider {provider!r} is already registered")
        self._deferred[provider] = load

    def offer(self, route: str) -> None:
        """Add a route to the list users may pick from (ACP config option, `/model`)."""
        if route not in self.routes:
            self.routes.append(route)

    def resolve(self, route: str) -> ModelProvider:
        """The route's provider, built by its factory on first use and kept (a refusal,
        `RouteError`, is not kept: the next call asks the factory again)."""
        built = self._providers.get(route)
        if built is not None:
            return built
        provider, model = split_route(route)
        load = self._deferred.pop(provider, None)
        if load is not None:
            try:
                load()
            except BaseException:
                self._deferred[provider] = load  # the next resolve tries again
                raise
        factory = self._factories.get(provider)
        if factory is None:
            known = ", ".join(sorted(self._factories.keys() | self._deferred.keys())) or "none"
            raise RouteError(
                "unknown_provider",
                f"no model provider named {provider!r} (route {route!r}); known providers: {known}",
            )
        built = self._providers[route] = factory(model)
        return built

    async def refresh(self) -> None:
        """Re-read credentials (`on_refresh`) and forget every provider built without a key
        it needs, closing it, so the next `resolve` of its route builds it afresh."""
        if self.on_refresh is not None:
            self.on_refresh()
        stale = [r for r, p in self._providers.items() if p.info.needs_api_key_env]
        for route in stale:
            provider = self._providers.pop(route)
            close = getattr(provider, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:
                    log.exception("closing the model provider %s failed", route)

    async def aclose(self) -> None:
        """Close every provider built so far (those with an `aclose()`) and forget them."""
        providers = list(self._providers.values())
        self._providers.clear()
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                log.exception("closing the model provider %s failed", provider.info.route)
