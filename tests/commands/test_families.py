"""Route families: a bridge's own default store, and whose sessions each port lists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from steerable_bridge.commands.families import BRIDGE_PROVIDERS, bridge_storage, family_filter
from steerable_bridge.commands.storage_choice import default_storage
from steerable_bridge.transports.acp.bridge import ROUTE_PROVIDER
from steerable_bridge.transports.agui.bridge import EndpointSettings


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("STEERABLE_STORAGE", raising=False)
    return tmp_path / "steerable-bridge"


def test_a_bridge_on_the_default_storage_gets_a_store_of_its_own(state: Path) -> None:
    codex = bridge_storage(default_storage(), "acp-agent:codex-acp")
    agui = bridge_storage(default_storage(), "agui:127.0.0.1:8000/agent")
    assert codex == str(state / "bridges" / "acp-agent_codex-acp" / "sessions.db")
    assert os.path.dirname(agui) == str(state / "bridges" / "agui_127.0.0.1_8000_agent")
    assert len({codex, agui, default_storage()}) == 3


def test_a_storage_the_user_chose_is_kept_for_a_bridge(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bridge_storage("/data/shared.db", "acp-agent:codex") == "/data/shared.db"
    assert bridge_storage("memory", "acp-agent:codex") == "memory"
    monkeypatch.setenv("STEERABLE_STORAGE", str(state / "sessions.db"))
    assert bridge_storage(default_storage(), "acp-agent:codex") == default_storage()


def test_each_family_keeps_to_its_own_routes() -> None:
    native, codex = family_filter("openai:gpt-4.1"), family_filter("acp-agent:codex")
    assert native("demo:default") and native("anthropic:claude") and not native("agui:h/agent")
    assert not native("acp-agent:codex")
    assert codex("acp-agent:codex") and not codex("acp-agent:claude") and not codex("demo:x")


def test_the_bridge_providers_are_the_bridges_route_providers() -> None:
    agui = EndpointSettings(url="http://127.0.0.1:9/agent").route.partition(":")[0]
    assert set(BRIDGE_PROVIDERS) == {ROUTE_PROVIDER, agui}
