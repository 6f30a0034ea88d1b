"""Memory and tool-output limits read from the environment, and what they change."""

from __future__ import annotations

import argparse

import pytest

from steerable_bridge.commands.common import add_agent_options, build_agent
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.limits_env import limits_from_env
from steerable_bridge.runtime.tool_calls.bounding import OutputLimits, cut_middle


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_options(parser)
    return parser.parse_args(["--storage", "memory"])


def test_defaults_are_the_agents() -> None:
    limits = limits_from_env({})
    assert (limits.max_sessions, limits.session_ttl_s) == (256, 600.0)
    assert limits.output_limits == OutputLimits(max_lines=2000, max_bytes=50_000)


def test_the_environment_reaches_the_agent_and_its_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_SESSION_CACHE", "16")
    monkeypatch.setenv("STEERABLE_SESSION_TTL", "90.5")
    monkeypatch.setenv("STEERABLE_TOOL_OUTPUT_LINES", "100")
    monkeypatch.setenv("STEERABLE_TOOL_OUTPUT_BYTES", "20_000")
    agent = build_agent(parse())
    config = agent.config
    assert (config.max_sessions, config.session_ttl_s) == (16, 90.5)
    assert config.output_limits == OutputLimits(max_lines=100, max_bytes=20_000)
    assert cut_middle("line\n" * 150, config.output_limits) is not None  # 150 > 100 lines
    from steerable_bridge.cli import build_parser
    from steerable_bridge.commands.serve import build_app

    app = build_app(build_parser("serve").parse_args(["serve", "--storage", "memory"]))
    threads = app.state.threads
    assert (threads._threads.capacity, threads._threads.ttl_s) == (16, 90.5)


@pytest.mark.parametrize(
    ("name", "value", "accepts"),
    [
        ("STEERABLE_SESSION_CACHE", "0", "whole number of sessions"),
        ("STEERABLE_SESSION_CACHE", "lots", "whole number of sessions"),
        ("STEERABLE_SESSION_TTL", "-5", "seconds above 0"),
        ("STEERABLE_SESSION_TTL", "inf", "seconds above 0"),
        ("STEERABLE_SESSION_TTL", "10m", "seconds above 0"),
        ("STEERABLE_TOOL_OUTPUT_LINES", "5", "at least 10"),
        ("STEERABLE_TOOL_OUTPUT_BYTES", "50KB", "whole number of bytes"),
        ("STEERABLE_TOOL_OUTPUT_BYTES", "999", "at least 1,000"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, accepts: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        build_agent(parse())
    assert name in str(err.value) and repr(value) in str(err.value)
    assert accepts in str(err.value)
