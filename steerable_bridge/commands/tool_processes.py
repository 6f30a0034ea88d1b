"""What governs the processes tools start: the sandbox, network and environment options.

`add_tool_process_options(parser)` adds `--pass-env`, `--sandbox`, `--sandbox-net` and
`--mcp-net` (defaults from `settings.ToolProcessSettings`); `command_policy(args)` turns
them into the adapters' `CommandPolicy` and, the first time, warns on stderr when bubblewrap
does not work here; `sandbox_advisories(args)` is that warning as the notice each session
shows once. Mistakes raise `ConfigError` naming the values allowed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from steerable_bridge.commands.errors import ConfigError

if TYPE_CHECKING:
    from steerable_bridge.adapters.tools.confinement import CommandPolicy
    from steerable_bridge.runtime.values import Advisory

__all__ = ["add_tool_process_options", "command_policy", "sandbox_advisories"]


def add_tool_process_options(parser: argparse.ArgumentParser) -> None:
    """Options for the processes tools start: commands and stdio MCP servers."""
    from steerable_bridge.commands.settings import ToolProcessSettings

    settings = ToolProcessSettings.lenient()
    parser.add_argument(
        "--pass-env",
        default=",".join(settings.pass_env),
        metavar="NAME,...",
        help="secret-looking variables (*_KEY, *_TOKEN, *_SECRET, *PASSWORD*, ...) that"
        " commands and MCP servers may still see; every other such variable is removed"
        " from their environment (default: $STEERABLE_PASS_ENV, none)",
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "require", "off"),
        default=settings.sandbox,
        help="run commands and stdio MCP servers in a bubblewrap sandbox (read-only system,"
        " writable workspace, private /tmp and /proc, home hidden): auto = when bwrap works"
        " here, else unconfined with a warning (default), require = refuse them without it,"
        " off = never ($STEERABLE_SANDBOX)",
    )
    parser.add_argument(
        "--sandbox-net",
        choices=("deny", "allow"),
        default=settings.sandbox_net,
        help="may sandboxed commands use the network? (default deny; $STEERABLE_SANDBOX_NET)",
    )
    parser.add_argument(
        "--mcp-net",
        choices=("deny", "allow"),
        default=settings.mcp_net,
        help="may sandboxed stdio MCP servers use the network? A server's"
        " _meta.steerable.network (true/false) overrides it (default allow; $STEERABLE_MCP_NET)",
    )


def command_policy(args: argparse.Namespace) -> CommandPolicy:
    """The policy `add_tool_process_options` describes. The first call prints, on stderr,
    the warning that bubblewrap does not work here (unless `--sandbox off`)."""
    from steerable_bridge.adapters.tools.confinement import CommandPolicy, startup_notice
    from steerable_bridge.adapters.tools.tool_env import parse_pass_env

    if args.sandbox not in ("auto", "require", "off"):
        raise ConfigError(f"STEERABLE_SANDBOX={args.sandbox!r}: use auto, require or off")
    for name in ("sandbox_net", "mcp_net"):
        if getattr(args, name) not in ("deny", "allow"):
            variable = f"STEERABLE_{name.upper()}"
            raise ConfigError(f"{variable}={getattr(args, name)!r}: use deny or allow")
    policy = CommandPolicy(
        pass_env=parse_pass_env(args.pass_env),
        sandbox=args.sandbox,
        network=args.sandbox_net == "allow",
        mcp_network=args.mcp_net == "allow",
    )
    if not _noticed:
        _noticed.append(True)
        notice = startup_notice(policy)
        if notice is not None:
            print(notice, file=sys.stderr, flush=True)
    return policy


_noticed: list[bool] = []


def sandbox_advisories(args: argparse.Namespace) -> tuple[Advisory, ...]:
    """The notice each session shows once when bubblewrap does not work here: commands run
    unsandboxed (`--sandbox auto`) or are refused (`require`); none for commands without
    `--sandbox` or with `--sandbox off` (the user's own choice)."""
    from steerable_bridge.adapters.tools.confinement import startup_notice
    from steerable_bridge.runtime.values import Advisory

    if getattr(args, "sandbox", "off") == "off":
        return ()
    policy = command_policy(args)
    text = startup_notice(policy)
    if text is None:
        return ()
    title = (
        "Commands run without a sandbox"
        if policy.sandbox == "auto"
        else "Commands will be refused: no sandbox"
    )
    return (Advisory(severity="warning", title=title, description=text.removeprefix("warning: ")),)
