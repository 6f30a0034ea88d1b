"""Scoped registries: precedence by nearness, duplicate rejection, disposal, stable snapshots."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.agent_sessions.registry import DuplicateName, PromptSection, Registry


def section(name: str, text: str) -> PromptSection:
    return PromptSection(name=name, text=text)


def texts(registry: Registry[PromptSection], scope: tuple[str, ...]) -> dict[str, str]:
    return {s.name: s.text for s in registry.snapshot(scope)}


def test_nearer_scopes_win_by_name() -> None:
    registry: Registry[PromptSection] = Registry()
    registry.register(section("style", "global style"))
    registry.register(section("rules", "global rules"))
    registry.register(section("style", "project style"), ("proj",))
    registry.register(section("style", "session style"), ("proj", "sess"))
    registry.register(section("extra", "other project"), ("other",))
    assert texts(registry, ()) == {"style": "global style", "rules": "global rules"}
    assert texts(registry, ("proj",)) == {"style": "project style", "rules": "global rules"}
    assert texts(registry, ("proj", "sess")) == {"style": "session style", "rules": "global rules"}
    assert texts(registry, ("proj", "other-session")) == texts(registry, ("proj",))
    assert "extra" not in texts(registry, ("proj", "sess"))


def test_duplicate_names_in_one_layer_are_refused_but_other_layers_may_override() -> None:
    registry: Registry[PromptSection] = Registry()
    registry.register(section("a", "1"))
    with pytest.raises(DuplicateName, match="'a' is already registered in scope global"):
        registry.register(section("a", "2"))
    registry.register(section("a", "3"), ("s",))
    with pytest.raises(DuplicateName, match="scope s"):
        registry.register(section("a", "4"), ("s",))
    assert texts(registry, ()) == {"a": "1"}


def test_disposers_remove_only_their_own_item() -> None:
    registry: Registry[PromptSection] = Registry()
    dispose_global = registry.register(section("a", "global"))
    dispose_near = registry.register(section("a", "near"), ("s",))
    dispose_near()
    assert texts(registry, ("s",)) == {"a": "global"}
    dispose_near()  # a second call is harmless
    again = registry.register(section("a", "again"), ("s",))
    dispose_near()  # the old disposer must not remove the new item
    assert texts(registry, ("s",)) == {"a": "again"}
    again()
    dispose_global()
    assert registry.snapshot(("s",)) == ()


def test_snapshots_do_not_change_after_registration() -> None:
    registry: Registry[PromptSection] = Registry()
    registry.register(section("a", "1"))
    snapshot = registry.snapshot()
    registry.register(section("b", "2"))
    assert [s.name for s in snapshot] == ["a"]
    assert [s.name for s in registry.snapshot()] == ["a", "b"]
