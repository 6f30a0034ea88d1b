"""`steerable-bridge acp --agui-url URL`: an AG-UI endpoint served to an editor as an ACP agent.

The pieces, composed here: the endpoint (`transports/agui/bridge`: URL, `--agui-header`
headers, timeouts, one pooled HTTP client) registered as the one model route of a runtime
`Agent` whose turn engine is the bridge's `AguiEngine`, on the usual store (`--storage`),
approvals memory and tracing; then the ACP transport's `serve`, exactly as for our own
runtime. Tools, hooks and the model-quality layer do not apply (the far server runs the
model and the tools), so `--tools-module` is refused. Option mistakes exit 2 with one line
naming the remedy; the transports are imported only once the options are good.
"""

from __future__ import annotations

import argparse
from typing import Any

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.families import bridge_storage
from steerable_bridge.commands.storage_choice import check_storage

__all__ = ["add_bridge_options", "run_agui_bridge"]


def add_bridge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agui-url",
        metavar="URL",
        help="bridge mode: serve this AG-UI endpoint (POST RunAgentInput → SSE) as the agent,"
        " e.g. http://127.0.0.1:8000/agent",
    )
    parser.add_argument(
        "--agui-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header sent with every AG-UI run (repeatable), e.g. for auth:"
        " 'Authorization: Bearer TOKEN'",
    )
    parser.add_argument(
        "--agui-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="the longest one AG-UI run may stream (900)",
    )
    parser.add_argument(
        "--agui-idle-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="the longest the AG-UI server may send nothing during a run (120)",
    )


def _settings(args: argparse.Namespace) -> Any:
    from steerable_bridge.transports.agui.bridge import EndpointSettings, parse_header

    try:
        headers = tuple(parse_header(text) for text in args.agui_header)
        return EndpointSettings(
            url=args.agui_url,
            headers=headers,
            run_timeout_s=args.agui_timeout,
            idle_timeout_s=args.agui_idle_timeout,
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None


def run_agui_bridge(args: argparse.Namespace) -> int:
    """Serve `--agui-url` over ACP on stdin / stdout until the editor closes stdin."""
    import functools

    import anyio

    from steerable_bridge.commands.logs import configure_logging
    from steerable_bridge.commands.relay import relay_signals
    from steerable_bridge.commands.startup import announce, redacted_storage
    from steerable_bridge.runtime.ports.model import ModelInfo
    from steerable_bridge.transports.acp.server import serve

    configure_logging(args)
    if args.tools_module:
        raise ConfigError(
            "--tools-module does not apply with --agui-url: the AG-UI server runs its own"
            " tools; drop one of the two"
        )
    if args.permission_timeout <= 0:
        raise ConfigError("--permission-timeout must be a positive number of seconds")
    settings = _settings(args)
    args.storage = bridge_storage(args.storage, settings.route)  # its own, unless told to share
    check_storage(args.storage)
    route = settings.route
    announce(
        f"steerable-bridge: bridging the AG-UI endpoint {settings.url} (model {route}),"
        f" storage {redacted_storage(args.storage)}",
        args.log_format,
    )
    anyio.run(
        functools.partial(
            serve,
            functools.partial(_build_agent, args, settings),
            info=ModelInfo(route=route, accepts_images=True),
            model=route,
            workspaces=None,
            permission_timeout_s=args.permission_timeout,
            background=relay_signals,
        )
    )
    return 0


def _build_agent(args: argparse.Namespace, settings: Any) -> Any:
    """The agent port over a runtime agent whose turns run on the AG-UI endpoint."""
    from steerable_bridge.commands.families import family_filter
    from steerable_bridge.commands.storage_choice import build_approvals, build_store
    from steerable_bridge.commands.telemetry import tracing_observers
    from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig, new_id
    from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
    from steerable_bridge.runtime.agent_sessions.routing import ModelRouter, RouteError
    from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings
    from steerable_bridge.runtime.turns.turn import LoopSettings
    from steerable_bridge.transports.agui.bridge import AguiEndpoint, AguiEngine

    endpoint = AguiEndpoint(settings)
    route = settings.route
    bridged = route.partition(":")[2]

    def factory(name: str) -> Any:
        if name != bridged:
            raise RouteError(
                "unknown_model",
                f"this bridge serves only {route}; pick that model",
            )
        return endpoint

    router = ModelRouter()
    router.register("agui", factory)
    router.offer(route)
    config = AgentConfig(
        model=route,
        approval=args.approve,
        loop=LoopSettings(permission_timeout_s=args.permission_timeout, new_id=new_id),
        quality=QualitySettings(mode="off"),
    )
    agent = Agent(
        router=router,
        store=build_store(args.storage),
        config=config,
        observers=tracing_observers(),
        approvals=build_approvals(args.storage),
        engine=AguiEngine(endpoint),
    )
    return LocalPort(agent, family=family_filter(route))
