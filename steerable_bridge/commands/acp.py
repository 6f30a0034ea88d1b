"""`steerable-bridge acp`: serve the agent to an editor over ACP (JSON-RPC on stdin / stdout).

Editors (Zed, JetBrains, any ACP client) launch this command. Model, storage and approval
options are the shared ones (`--model`, `STEERABLE_*`); with nothing configured it runs the
keyless demo model. Only JSON-RPC frames go to stdout; logs go to stderr at the level of
`--log-level` / `STEERABLE_LOG` (debug, info, warning) and, with `--log-file` /
`STEERABLE_LOG_FILE`, to a file too; `--log-format json` writes one JSON object per line
(`logs.py`). `--tools-module` loads extra tools (a Python file or module exposing `TOOLS`
or `tools()`); `--hooks-module` loads hooks the same way. `--agui-url URL` serves an AG-UI
endpoint instead of our runtime (bridge mode, `acp_agui.py`); `--listen HOST:PORT` serves
the same agent to remote clients over HTTP and WebSocket (`acp_remote.py`). Heavy imports
happen inside `main`, so `--help` and the other commands never load the ACP SDK. To add an
option, add it in `register` and read it in `main`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.acp_agui import add_bridge_options, run_agui_bridge
from steerable_bridge.commands.acp_remote import add_remote_options
from steerable_bridge.commands.check import add_validate_client_options, run_validate_client
from steerable_bridge.commands.common import add_agent_options
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.logs import add_log_options, configure_logging
from steerable_bridge.commands.relay import relay_signals
from steerable_bridge.commands.storage_choice import check_storage
from steerable_bridge.commands.tool_processes import add_tool_process_options, command_policy

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.model import ModelInfo

EDITOR_WORKSPACE = "each session's folder, as the editor opens it"
"""What the start-up line names as the workspace: the editor picks it per session."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "acp", help="serve the agent over ACP on stdin/stdout (for Zed, JetBrains, ...)"
    )
    add_agent_options(parser)
    add_log_options(parser)
    parser.add_argument(
        "--permission-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the editor to answer a permission request (300)",
    )
    parser.add_argument(
        "--tools-module",
        action="append",
        default=[],
        metavar="PATH_OR_MODULE",
        help="load extra tools from a Python file or module exposing TOOLS or tools()",
    )
    add_tool_process_options(parser)
    add_bridge_options(parser)  # --agui-url: serve an AG-UI endpoint instead (acp_agui.py)
    add_validate_client_options(parser)  # --validate-client: the reference agent instead
    add_remote_options(parser)  # --listen: serve remote clients over HTTP / WebSocket
    parser.add_argument(
        "action",
        nargs="?",
        choices=["login"],
        help="`login`: run the interactive `steerable-bridge login` instead of serving (what"
        " a client that appends the terminal auth method's args to `acp` runs)",
    )
    parser.set_defaults(func=main)


def load_tools(spec: str) -> list[Any]:
    """The tools a `--tools-module` file or module exposes."""
    from steerable_bridge.commands.common import load_user_module
    from steerable_bridge.runtime.ports.tools import Tool

    module = load_user_module(spec, "--tools-module")
    found = getattr(module, "TOOLS", None)
    if found is None and callable(getattr(module, "tools", None)):
        found = module.tools()
    tools = list(found or [])
    if not tools or not all(isinstance(tool, Tool) for tool in tools):
        raise ConfigError(
            f"--tools-module {spec} must expose TOOLS (a list of Tool) or tools() returning one"
        )
    return tools


def main(args: argparse.Namespace) -> int:
    if args.action == "login":
        from steerable_bridge.commands.login import run_login

        return run_login(provider=None, base_url=None, key_stdin=False)
    if args.listen is not None and (args.validate_client or args.agui_url is not None):
        raise ConfigError(
            "--listen serves our agent; it does not combine with --validate-client or"
            " --agui-url: drop one of them"
        )
    if args.validate_client:
        return run_validate_client(args)
    if args.agui_url is not None:
        return run_agui_bridge(args)
    import functools

    import anyio

    from steerable_bridge.transports.acp.server import serve

    configure_logging(args)
    extra, info = prepare(args)
    from steerable_bridge.commands.startup import announce, startup_line

    announce(startup_line(args.model, args.storage, EDITOR_WORKSPACE), args.log_format)
    if args.listen is not None:
        from steerable_bridge.commands.acp_remote import run_remote

        return run_remote(
            args,
            build_port=functools.partial(_build_port, args, extra),
            workspaces=functools.partial(_workspaces, args),
            info=info,
        )
    anyio.run(functools.partial(serve, **serve_options(args, extra, info)))
    return 0


def prepare(args: argparse.Namespace) -> tuple[list[Any], ModelInfo | None]:
    """Check the options and read what `initialize` needs, before anything is served: the
    `--tools-module` tools and the default model's `ModelInfo`. Sets `args.model_env` (the
    provider settings plus stored credentials, read once). A mistake is a `ConfigError`."""
    from steerable_bridge.commands.model_routes import build_router, model_env
    from steerable_bridge.commands.settings import current_settings
    from steerable_bridge.runtime.agent_sessions.routing import RouteError
    from steerable_bridge.runtime.ports.model import ProviderError

    if args.permission_timeout <= 0:
        raise ConfigError("--permission-timeout must be a positive number of seconds")
    if args.max_steps < 1:
        raise ConfigError("--max-steps must be at least 1")
    extra = [tool for spec in args.tools_module for tool in load_tools(spec)]
    _check_quality(args)
    check_storage(args.storage)  # before answering anything: one line on stderr, exit 2
    settings = current_settings(args)
    args.model_env = model_env(settings)  # the provider settings plus stored credentials
    try:  # what `initialize` needs; the rest is built right after it is answered
        router = build_router(args.model, env=args.model_env, settings=settings)
        info = router.resolve(args.model).info
    except (RouteError, ProviderError) as error:
        raise ConfigError(error.message) from None
    return extra, info


def serve_options(
    args: argparse.Namespace, extra: list[Any], info: ModelInfo | None
) -> dict[str, Any]:
    """What `transports.acp.server.serve` takes for these options (after `prepare`): our
    agent port, the editor's workspaces, the permission bound and the signal relay."""
    import functools

    return {
        "build": functools.partial(_build_port, args, extra),
        "info": info,
        "model": args.model,
        "workspaces": functools.partial(_workspaces, args),
        "permission_timeout_s": args.permission_timeout,
        "background": relay_signals,
    }


def _check_quality(args: argparse.Namespace) -> None:
    """Refuse a bad `--quality` or `--hooks-module` before serving, not after `initialize`."""
    from steerable_bridge.commands.common import load_hooks
    from steerable_bridge.commands.quality_flag import parse_quality  # not the guards

    try:
        parse_quality(args.quality)
    except ValueError as err:
        raise ConfigError(f"--quality: {err}") from None
    for spec in args.hooks_module:
        load_hooks(spec)


def _build_port(args: argparse.Namespace, extra: list[Any]) -> Any:
    """The agent port the transport serves: our runtime agent (`LocalPort`) with the
    built-in and `--tools-module` tools."""
    import dataclasses

    from steerable_bridge.adapters.tools.builtin import builtin_tools
    from steerable_bridge.commands.common import build_agent
    from steerable_bridge.commands.families import family_filter
    from steerable_bridge.commands.telemetry import tracing_observers
    from steerable_bridge.runtime.agent_sessions.conversations import LocalPort

    agent = build_agent(args, tools=[*builtin_tools(), *extra], observers=tracing_observers())
    agent.config = dataclasses.replace(
        agent.config,
        loop=dataclasses.replace(agent.config.loop, permission_timeout_s=args.permission_timeout),
    )
    return LocalPort(agent, family=family_filter(agent.config.model))


def _workspaces(args: argparse.Namespace) -> Any:
    """Workspace tools, the editor's fs / terminal, and MCP servers for every session."""
    import functools

    from steerable_bridge.transports.acp.client_env import AcpWorkspaces

    return AcpWorkspaces(functools.partial(_workspace_kit, command_policy(args)))


def _workspace_kit(policy: Any, cwd: str, additional: tuple[str, ...], spawn: Any) -> Any:
    """A session's workspace kit, imported on first use: the MCP client libraries it loads
    would otherwise add ~0.4 s to every start, before the editor's `initialize` is answered."""
    from steerable_bridge.adapters.tools.kit import WorkspaceKit

    return WorkspaceKit(cwd, additional, spawn, policy=policy)
