"""Stored credentials and `steerable-bridge login`: where and how they are saved, when the
model routes use them, and that an environment variable always wins."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from steerable_bridge.adapters.llm.anthropic import AnthropicProvider
from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider
from steerable_bridge.commands.credentials import (
    ModelEnv,
    StoredKey,
    credentials_path,
    load_credentials,
    overlay,
    save_credential,
)
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.login import run_login
from steerable_bridge.commands.model_routes import build_router


class Pipe(io.StringIO):
    """Stdin that is not a terminal (what an editor or a script gives `login`)."""

    def isatty(self) -> bool:
        return False


def login(text: str = "", **flags: object) -> str:
    out = io.StringIO()
    options: dict[str, object] = {"provider": None, "base_url": None, "key_stdin": False}
    options.update(flags)
    assert run_login(stdin=Pipe(text), out=out, **options) == 0  # type: ignore[arg-type]
    return out.getvalue()


def test_login_saves_0600_in_a_0700_dir_under_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    said = login("sk-one\n", provider="openai", base_url="https://llm.example/v1", key_stdin=True)
    path = tmp_path / "cfg" / "steerable-bridge" / "credentials.json"
    assert credentials_path() == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert str(path) in said and "sk-one" not in said
    login("sk-two\n", provider="anthropic", key_stdin=True)
    assert load_credentials(path) == {
        "openai": StoredKey(base_url="https://llm.example/v1", api_key="sk-one"),
        "anthropic": StoredKey(base_url="", api_key="sk-two"),
    }
    assert sorted(p.name for p in path.parent.iterdir()) == ["credentials.json"]  # no temp left


def test_without_xdg_config_home_it_lives_under_dot_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert credentials_path() == tmp_path / ".config" / "steerable-bridge" / "credentials.json"


def test_login_refuses_what_it_cannot_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="--provider is required"):
        login("")
    with pytest.raises(ConfigError, match=r"needs an API key.*--key-stdin"):
        login("", provider="openai")  # the public API, no key
    with pytest.raises(ConfigError, match="not an http"):
        login("k\n", provider="openai", base_url="ftp://x", key_stdin=True)
    assert not credentials_path().exists()
    said = login("", provider="openai", base_url="http://127.0.0.1:11434/v1")  # local: no key
    assert "no key" in said


def test_a_stored_entry_applies_only_when_the_environment_configures_none_of_its_provider() -> None:
    stored = {
        "openai": StoredKey(base_url="https://llm.example/v1", api_key="sk-stored"),
        "anthropic": StoredKey(base_url="", api_key="sk-ant-stored"),
    }
    merged = overlay({}, stored)
    assert merged["OPENAI_API_KEY"] == "sk-stored"
    assert merged["OPENAI_BASE_URL"] == "https://llm.example/v1"
    assert merged["ANTHROPIC_API_KEY"] == "sk-ant-stored" and "ANTHROPIC_BASE_URL" not in merged
    local = overlay({"STEERABLE_BASE_URL": "http://127.0.0.1:8000/v1"}, stored)
    assert "OPENAI_API_KEY" not in local  # a stored key never goes to a URL the env chose
    assert overlay({"ANTHROPIC_API_KEY": "sk-env"}, stored)["ANTHROPIC_API_KEY"] == "sk-env"


def test_routes_use_the_stored_key_and_pick_up_a_login_on_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    env = ModelEnv(env={"XDG_CONFIG_HOME": str(tmp_path)})
    router = build_router("openai:gpt-x", env=env)
    before = router.resolve("openai:gpt-x")
    assert before.info.needs_api_key_env == "STEERABLE_API_KEY"
    assert router.routes == ["openai:gpt-x", "demo:default"]
    login("sk-o\n", provider="openai", base_url="https://llm.example/v1", key_stdin=True)
    login("sk-a\n", provider="anthropic", key_stdin=True)

    import anyio

    anyio.run(router.refresh)
    after = router.resolve("openai:gpt-x")
    assert isinstance(after, OpenAICompatProvider) and after is not before
    assert after.info.needs_api_key_env is None
    assert (after.config.api_key, after.config.base_url) == ("sk-o", "https://llm.example/v1")
    claude = router.resolve("anthropic:claude-x")
    assert isinstance(claude, AnthropicProvider) and claude.config.api_key == "sk-a"
    fresh = build_router("openai:gpt-x", env=ModelEnv(env={"XDG_CONFIG_HOME": str(tmp_path)}))
    assert "anthropic:claude-sonnet-4-5" in fresh.routes  # a stored Anthropic key offers Claude


def test_an_unreadable_file_is_ignored_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "credentials.json"
    path.write_text("{not json")
    assert load_credentials(path) == {}
    assert "steerable-bridge login" in caplog.text
    path.write_text(json.dumps({"providers": {"openai": {"api_key": 7}, "nope": {}}}))
    assert load_credentials(path) == {}
    save_credential(path, "openai", StoredKey(base_url="", api_key="k"))  # rewrites it
    assert load_credentials(path) == {"openai": StoredKey(base_url="", api_key="k")}
