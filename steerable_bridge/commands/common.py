"""What every command that holds sessions shares: the agent options and the agent they build.

`add_agent_options(parser)` adds `--model`, `--storage` (`storage_choice.py`), `--approve`,
`--max-steps`, `--quality`, `--hooks-module` and the model-call deadlines
(`model_deadlines.py`), their defaults from the settings model (`settings.py`);
`build_agent(args)` turns them and the settings the CLI validated (`current_settings`) into
an `Agent` with the router (`model_routes.py`), store, limits, compaction, quality settings,
hooks and the sandbox notice (`tool_processes.py`). Mistakes raise `ConfigError`, which the
CLI prints as one line with the remedy (exit 2). This is the composition root: the only
place adapters are chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.model_deadlines import (
    STEP_GRACE_S,
    add_deadline_options,
    deadlines_from_args,
)
from steerable_bridge.commands.model_routes import build_router
from steerable_bridge.commands.settings import current_settings
from steerable_bridge.commands.storage_choice import (
    add_storage_option,
    build_approvals,
    build_store,
    protect_agent_files,
)
from steerable_bridge.commands.tool_processes import sandbox_advisories
from steerable_bridge.runtime.agent_sessions.routing import ProviderFactory, RouteError

if TYPE_CHECKING:  # the rest of the runtime loads in build_agent: `acp` answers initialize first
    from steerable_bridge.runtime.agent_sessions.agent import Agent
    from steerable_bridge.runtime.ports.observe import Observer
    from steerable_bridge.runtime.ports.storage import SessionStore
    from steerable_bridge.runtime.ports.tools import Tool
    from steerable_bridge.runtime.turns.hooks import Hook
    from steerable_bridge.runtime.turns.turn import TurnEngine

__all__ = ["add_agent_options", "build_agent", "load_hooks", "load_user_module"]


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    from steerable_bridge.commands.settings import AgentSettings

    settings = AgentSettings.lenient()  # the defaults; a bad value is reported at start-up
    parser.add_argument(
        "--model",
        default=settings.model,
        help="model route provider:model — demo:default (built in, no key), scripted:PATH,"
        " openai:NAME, anthropic:NAME (default: $STEERABLE_MODEL or demo:default)",
    )
    add_storage_option(parser)
    parser.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default=settings.approve,
        help="tools that change things: ask first (default), allow all, or allow none",
    )
    parser.add_argument(
        "--max-steps", type=int, default=25, help="model calls per turn before it stops (25)"
    )
    parser.add_argument(
        "--quality",
        default=settings.quality,
        metavar="SPEC",
        help="model-quality layer: auto (on for openai: routes), on, off, and NAME=VALUE"
        " items, comma separated: recover, dedup, dedup_limit, breaker, soft_timeout,"
        " max_tool_calls, max_tokens, retries, narrate; or a JSON object of QualitySettings"
        " fields (default: $STEERABLE_QUALITY or auto; see docs/model-quality.md)",
    )
    parser.add_argument(
        "--hooks-module",
        action="append",
        default=[],
        metavar="PATH_OR_MODULE",
        help="load hooks from a Python file or module exposing HOOKS or hooks()",
    )
    add_deadline_options(parser, settings)


def load_user_module(spec: str, flag: str) -> ModuleType:
    """Import a user's Python file (`*.py`) or module for `flag`; ConfigError when it fails."""
    import importlib.util

    try:
        if spec.endswith(".py"):
            location = importlib.util.spec_from_file_location(
                f"steerable_user_{abs(hash(spec))}", spec
            )
            if location is None or location.loader is None:
                raise ImportError(f"cannot load {spec}")
            module = importlib.util.module_from_spec(location)
            location.loader.exec_module(module)
            return module
        return importlib.import_module(spec)
    except (ImportError, OSError, SyntaxError) as error:
        raise ConfigError(f"{flag} {spec}: {error}") from None


def _exposed(module: ModuleType, constant: str, factory: str) -> list[Any]:
    found = getattr(module, constant, None)
    if found is None and callable(getattr(module, factory, None)):
        found = getattr(module, factory)()
    return list(found or [])


def load_hooks(spec: str) -> list[Hook]:
    """The hooks a `--hooks-module` file or module exposes (`HOOKS` or `hooks()`)."""
    from steerable_bridge.runtime.turns.hooks import Hook

    hooks = _exposed(load_user_module(spec, "--hooks-module"), "HOOKS", "hooks")
    if not hooks or not all(isinstance(hook, Hook) for hook in hooks):
        raise ConfigError(
            f"--hooks-module {spec} must expose HOOKS (a list of steerable_bridge.runtime.Hook)"
            " or hooks() returning one"
        )
    return hooks


def build_agent(
    args: argparse.Namespace,
    *,
    tools: Sequence[Tool] = (),
    approval: str | None = None,
    observers: Sequence[Observer] = (),
    wrap_store: Callable[[SessionStore], SessionStore] | None = None,
    engine: TurnEngine | None = None,
    providers: Mapping[str, ProviderFactory] | None = None,
) -> Agent:
    """The agent for a command's parsed options, with `tools` registered globally, turns
    watched by `observers`, and its store passed through `wrap_store` (e.g. to time it).
    `engine` runs its turns instead of our model loop (a bridge) and `providers` adds model
    providers by name (the bridged agent's route)."""
    from steerable_bridge.commands.compaction_env import compaction_from_settings
    from steerable_bridge.commands.limits_env import limits_from_settings
    from steerable_bridge.commands.quality_flag import parse_quality
    from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig, new_id
    from steerable_bridge.runtime.turns.turn import LoopSettings

    settings = current_settings(args)
    if args.max_steps < 1:
        raise ConfigError("--max-steps must be at least 1")
    try:
        quality = parse_quality(getattr(args, "quality", "auto"))
    except ValueError as err:
        raise ConfigError(f"--quality: {err}") from None
    hooks = [hook for spec in getattr(args, "hooks_module", ()) for hook in load_hooks(spec)]
    try:
        deadlines = deadlines_from_args(args)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    router = build_router(
        args.model, deadlines, getattr(args, "model_env", None), providers, settings
    )
    try:
        router.resolve(args.model)
    except RouteError as err:
        raise ConfigError(err.message) from None
    compaction = compaction_from_settings(settings.sessions)
    limits = limits_from_settings(settings.sessions)
    config = AgentConfig(
        model=args.model,
        approval=approval or args.approve,  # type: ignore[arg-type]
        loop=LoopSettings(
            max_steps=args.max_steps,
            model_timeout_s=deadlines.call_s + STEP_GRACE_S,
            new_id=new_id,
        ),
        quality=quality,
        compaction=compaction,
        output_limits=limits.output_limits,
        max_sessions=limits.max_sessions,
        session_ttl_s=limits.session_ttl_s,
        advisories=sandbox_advisories(args),
    )
    store = build_store(args.storage)
    if wrap_store is not None:
        store = wrap_store(store)
    agent = Agent(
        router=router,
        store=store,
        config=config,
        observers=observers,
        approvals=build_approvals(args.storage),
        engine=engine,
    )
    from steerable_bridge.adapters.tools.notes import ProjectNotes
    from steerable_bridge.adapters.tools.spill import FileSpill

    agent.spill = spill = FileSpill()  # full text of tool results cut for the model
    protect_agent_files(args.storage, str(spill.root))
    agent.notes = ProjectNotes().read  # AGENTS.md and the like, read off the event loop
    for tool in tools:
        agent.tools.register(tool)
    for hook in hooks:
        agent.hooks.register(hook)
    return agent
