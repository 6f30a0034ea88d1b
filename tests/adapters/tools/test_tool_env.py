"""Which variables tool processes inherit: secrets out unless passed by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.tool_env import (
    looks_secret,
    parse_pass_env,
    passed_variables,
    tool_environ,
)


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "STEERABLE_API_KEY",
        "ANTHROPIC_API_KEY",
        "STEERABLE_TOKEN",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "PGPASSWORD",
        "client_secret",
        "SSH_AUTH_SOCK",
        "GH_PAT",
    ],
)
def test_secret_looking_names(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "OPENAI_BASE_URL", "KEYBOARD", "TERM"])
def test_ordinary_names(name: str) -> None:
    assert not looks_secret(name)


def test_tool_environ_drops_secrets_unless_passed() -> None:
    base = {"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "GITHUB_TOKEN": "gh-2", "LANG": "C"}
    assert tool_environ((), base) == {"PATH": "/bin", "LANG": "C"}
    assert tool_environ({"GITHUB_TOKEN"}, base) == {
        "PATH": "/bin",
        "LANG": "C",
        "GITHUB_TOKEN": "gh-2",
    }
    assert passed_variables({"GITHUB_TOKEN", "UNSET"}, base) == {"GITHUB_TOKEN": "gh-2"}
    assert parse_pass_env(" A, ,B ") == {"A", "B"}


@pytest.mark.anyio
async def test_commands_do_not_see_the_agents_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-passed")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    env = LocalEnvironment(
        Workspace.of(str(tmp_path)), policy=CommandPolicy(pass_env=frozenset({"MY_SERVICE_TOKEN"}))
    )
    result = await env.run("env", cwd=str(tmp_path), timeout_s=10, output_limit=100_000)
    assert "sk-should-not-leak" not in result.output
    assert "MY_SERVICE_TOKEN=tok-passed" in result.output
    assert "HARMLESS_SETTING=visible" in result.output
