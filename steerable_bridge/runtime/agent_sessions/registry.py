"""Scoped registries for tools and prompt sections.

A scope is a path such as `("project-x", "session-1")`; `()` is global. `snapshot(scope)`
layers global, then each ancestor from farthest to nearest, then the exact scope, and a
nearer layer's item replaces a farther one of the same name. Two items with one name in one
layer are refused at registration. `register` returns a disposer that removes the item
again. The loop takes a snapshot at the start of every step, before it logs the request, so
a change affects the next step only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["DuplicateName", "PromptSection", "Registry", "Scope"]

Scope = tuple[str, ...]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=_Named)


class DuplicateName(ValueError):
    """Two items with one name in one scope."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSection:
    """A named piece of the system prompt."""

    name: str
    text: str


class Registry(Generic[T]):
    """Items keyed by name within scopes; see the module docstring for precedence."""

    def __init__(self) -> None:
        self._layers: dict[Scope, dict[str, T]] = {}

    def register(self, item: T, scope: Scope = ()) -> Callable[[], None]:
        """Add `item` to `scope`; returns a function that removes it again."""
        layer = self._layers.setdefault(scope, {})
        if item.name in layer:
            where = "/".join(scope) or "global"
            raise DuplicateName(
                f"{item.name!r} is already registered in scope {where}; dispose of it first"
                " or register it in a nearer scope to override it"
            )
        layer[item.name] = item

        def dispose() -> None:
            if layer.get(item.name) is item:
                del layer[item.name]

        return dispose

    def snapshot(self, scope: Scope = ()) -> tuple[T, ...]:
        """Every visible item for `scope`, nearer layers winning by name."""
        merged: dict[str, T] = {}
        for depth in range(len(scope) + 1):
            layer = self._layers.get(scope[:depth])
            if layer:
                merged.update(layer)
        return tuple(merged.values())
