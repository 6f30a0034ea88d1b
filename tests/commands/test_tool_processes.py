"""The tool-process options: what `--pass-env`, `--sandbox` and the network flags become."""

from __future__ import annotations

import argparse

import pytest

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.tool_processes import (
    add_tool_process_options,
    command_policy,
    sandbox_advisories,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_tool_process_options(parser)
    return parser.parse_args(list(argv))


def test_the_options_become_the_adapters_policy() -> None:
    policy = command_policy(
        parse(
            "--pass-env",
            "GH_TOKEN",
            "--sandbox",
            "off",
            "--sandbox-net",
            "allow",
            "--mcp-net",
            "deny",
        )
    )
    assert policy.pass_env == frozenset({"GH_TOKEN"})
    assert policy.sandbox == "off"
    assert policy.network is True
    assert policy.mcp_network is False


def test_the_defaults_deny_commands_the_network_and_allow_mcp_servers_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (
        "STEERABLE_PASS_ENV",
        "STEERABLE_SANDBOX",
        "STEERABLE_SANDBOX_NET",
        "STEERABLE_MCP_NET",
    ):
        monkeypatch.delenv(name, raising=False)
    policy = command_policy(parse("--sandbox", "off"))
    assert policy.pass_env == frozenset()
    assert (policy.network, policy.mcp_network) == (False, True)


@pytest.mark.parametrize(
    ("name", "value", "remedy"),
    [("sandbox", "maybe", "auto, require or off"), ("sandbox_net", "some", "deny or allow")],
)
def test_a_bad_value_from_the_environment_names_the_variable(
    name: str, value: str, remedy: str
) -> None:
    args = parse("--sandbox", "off")
    setattr(args, name, value)  # what a bad STEERABLE_* default would give
    with pytest.raises(ConfigError, match=f"STEERABLE_{name.upper()}='{value}': use {remedy}"):
        command_policy(args)


def test_sandbox_off_and_commands_without_the_option_show_no_notice() -> None:
    assert sandbox_advisories(parse("--sandbox", "off")) == ()
    assert sandbox_advisories(argparse.Namespace()) == ()
