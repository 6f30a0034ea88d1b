"""The shared agent options: `--quality` and `--hooks-module` reach the built agent."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from steerable_bridge.commands.common import add_agent_options, build_agent
from steerable_bridge.commands.errors import ConfigError

HOOKS_FILE = """
from steerable_bridge.runtime import Hook, Veto

HOOKS = [Hook(name="no-shell", before_tool=lambda call, ctx: Veto("no shell here"))]
"""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_options(parser)
    return parser.parse_args(["--storage", "memory", *argv])


def test_hooks_module_and_quality_settings_reach_the_agent(tmp_path: Path) -> None:
    hooks = tmp_path / "my_hooks.py"
    hooks.write_text(HOOKS_FILE, encoding="utf-8")
    agent = build_agent(
        parse("--hooks-module", str(hooks), "--quality", "on,dedup=off,soft_timeout=60")
    )
    assert [hook.name for hook in agent.hooks.snapshot()] == ["no-shell"]
    quality = agent.config.quality
    assert (quality.mode, quality.dedup, quality.soft_timeout_s) == ("on", False, 60.0)


def test_quality_defaults_to_auto_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert build_agent(parse()).config.quality.mode == "auto"
    monkeypatch.setenv("STEERABLE_QUALITY", "off")
    assert build_agent(parse()).config.quality.mode == "off"


def test_mistakes_name_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--quality: unknown quality setting 'dedupe=off'"):
        build_agent(parse("--quality", "dedupe=off"))
    with pytest.raises(ConfigError, match="takes a number"):
        build_agent(parse("--quality", "breaker=many"))
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must expose HOOKS"):
        build_agent(parse("--hooks-module", str(empty)))
    with pytest.raises(ConfigError, match="--hooks-module"):
        build_agent(parse("--hooks-module", str(tmp_path / "missing.py")))


def test_model_deadlines_reach_the_http_providers_and_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider

    monkeypatch.setenv("STEERABLE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STEERABLE_MODEL_IDLE_TIMEOUT", "600")
    agent = build_agent(parse("--model", "openai:m", "--model-deadline", "900"))
    provider = agent.router.resolve("openai:m")
    assert isinstance(provider, OpenAICompatProvider)
    assert (provider.config.deadlines.call_s, provider.config.deadlines.idle_s) == (900, 600)
    assert provider.config.read_timeout_s == 600  # httpx must not cut a raised idle wait
    assert agent.config.loop.model_timeout_s > 900


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_a_bad_model_deadline_names_the_option(value: str) -> None:
    with pytest.raises(ConfigError, match="--model-deadline"):
        build_agent(parse("--model-deadline", value))
