"""What every command that holds sessions shares: model, storage and approval options.

`add_agent_options(parser)` adds `--model`, `--storage`, `--approve`, `--max-steps`,
`--quality`, `--hooks-module` and the model-call deadlines (`model_deadlines.py`), their
defaults from the settings model (`settings.py`); `build_agent(args)` turns them and the
settings the CLI validated (`current_settings`) into an `Agent` with the configured
providers, store, limits, compaction, quality settings and hooks; `model_env` is what the
HTTP model adapters configure from.
`add_tool_process_options(parser)` adds what governs the processes tools start
(`--pass-env`, `--sandbox`, `--sandbox-net`, `--mcp-net`); `command_policy(args)` turns
them into the adapters' policy and warns on stderr when the sandbox does not work here.
`check_storage(spec)` opens and checks the store before a command binds or answers.
Mistakes raise `ConfigError`, which the CLI prints as one line with the remedy (exit 2).
This is the composition root: the only place adapters are chosen.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.model_deadlines import (
    STEP_GRACE_S,
    add_deadline_options,
    deadlines_from_args,
)
from steerable_bridge.runtime.agent_sessions.routing import (
    ModelRouter,
    ProviderFactory,
    RouteError,
    split_route,
)
from steerable_bridge.runtime.ports.model import ModelProvider

if TYPE_CHECKING:  # the rest of the runtime loads in build_agent: `acp` answers initialize first
    from steerable_bridge.adapters.llm.deadlines import CallDeadlines
    from steerable_bridge.adapters.tools.confinement import CommandPolicy
    from steerable_bridge.commands.credentials import ModelEnv
    from steerable_bridge.commands.settings import Settings
    from steerable_bridge.runtime.agent_sessions.agent import Agent
    from steerable_bridge.runtime.ports.observe import Observer
    from steerable_bridge.runtime.ports.storage import SessionStore
    from steerable_bridge.runtime.ports.tools import Tool
    from steerable_bridge.runtime.tool_calls.approvals import ApprovalMemory
    from steerable_bridge.runtime.turns.hooks import Hook
    from steerable_bridge.runtime.turns.turn import TurnEngine
    from steerable_bridge.runtime.values import Advisory

__all__ = [
    "ConfigError",
    "add_agent_options",
    "add_storage_option",
    "add_tool_process_options",
    "approvals_path",
    "build_agent",
    "build_approvals",
    "build_router",
    "build_store",
    "check_storage",
    "command_policy",
    "default_storage",
    "load_hooks",
    "load_user_module",
    "protect_agent_files",
    "state_dir",
]

DEFAULT_MODEL = "demo:default"


def current_settings(args: argparse.Namespace | None = None) -> Settings:
    """The settings the CLI validated for this command (`args.settings`), else read from
    the environment now; a bad value is a `SettingsError` (a `ConfigError`, one line each)."""
    from steerable_bridge.commands.settings import load_settings

    found = getattr(args, "settings", None)
    return found if found is not None else load_settings()


def model_env(settings: Settings) -> ModelEnv:
    """What the HTTP model adapters configure from: the provider settings as variables,
    overlaid with the credentials `login` stored (`credentials.ModelEnv`)."""
    from steerable_bridge.commands.credentials import ModelEnv, credentials_path

    return ModelEnv(settings.providers.environ(), path=credentials_path(settings.paths.environ()))


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


def build_router(
    model: str,
    deadlines: CallDeadlines | None = None,
    env: ModelEnv | None = None,
    providers: Mapping[str, ProviderFactory] | None = None,
    settings: Settings | None = None,
) -> ModelRouter:
    """A router with every provider this build ships, offering `model` first; HTTP providers
    bound each call by `deadlines` (the defaults of `CallDeadlines` when None) and configure
    from `env` (the provider settings plus stored credentials, `model_env`, when None),
    which `router.refresh()` re-reads. `providers` adds factories by provider name (a
    bridged agent's route). `settings` (read from the environment when None) sets the demo
    model's pace."""
    settings = current_settings() if settings is None else settings
    env = model_env(settings) if env is None else env
    router = ModelRouter()
    router.on_refresh = env.reload
    pace = settings.agent.demo_pace_ms

    def demo(name: str) -> ModelProvider:
        from steerable_bridge.adapters.llm.demo import DemoProvider

        return DemoProvider(pace_ms=pace)

    def scripted(path: str) -> ModelProvider:
        from steerable_bridge.adapters.llm.scripted import ScriptedProvider

        return ScriptedProvider.for_path(path)

    router.register("demo", demo)
    router.register("scripted", scripted)
    for name, factory in (providers or {}).items():
        router.register(name, factory)
    _register_http(router, env, deadlines)
    try:
        split_route(model)
    except RouteError as err:
        raise ConfigError(err.message) from None
    router.offer(model)
    for route in anthropic_routes(env):
        router.offer(route)
    router.offer(DEFAULT_MODEL)
    return router


DEFAULT_ANTHROPIC_MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
"""Offered to editors when an Anthropic key is set and STEERABLE_ANTHROPIC_MODELS is not."""


def anthropic_routes(env: Mapping[str, str]) -> list[str]:
    """The `anthropic:` routes to offer for selection (ACP config option, `/model`).

    `STEERABLE_ANTHROPIC_MODELS` (comma-separated model names) when set; otherwise, once
    `ANTHROPIC_API_KEY` is set, the current Claude models; none without a key.
    """
    listed = env.get("STEERABLE_ANTHROPIC_MODELS")
    if listed is not None:
        names = [name.strip() for name in listed.split(",") if name.strip()]
    elif env.get("ANTHROPIC_API_KEY"):
        names = list(DEFAULT_ANTHROPIC_MODELS)
    else:
        names = []
    return [f"anthropic:{name}" for name in names]


HTTP_PROVIDERS = {
    "openai": "steerable_bridge.adapters.llm.openai_compat",
    "anthropic": "steerable_bridge.adapters.llm.anthropic",
    "openai-responses": "steerable_bridge.adapters.llm.openai_responses",
}
"""The HTTP model adapters by route prefix; each module's `register` offers that prefix."""


def _register_http(
    router: ModelRouter, env: Mapping[str, str], deadlines: CallDeadlines | None
) -> None:
    # Each adapter's own `register(router, env, deadlines)`, called when the first route of
    # its prefix resolves (`ModelRouter.on_first_use`): a start that uses none of them
    # imports none (~20 ms). The router keeps the provider built for a route (one pooled
    # HTTP client each) and closes it when the agent shuts down.
    for prefix, module in HTTP_PROVIDERS.items():
        router.on_first_use(prefix, partial(_register_adapter, module, router, env, deadlines))


def _register_adapter(
    module: str, router: ModelRouter, env: Mapping[str, str], deadlines: CallDeadlines | None
) -> None:
    importlib.import_module(module).register(router, env, deadlines)


def default_storage() -> str:
    """`$STEERABLE_STORAGE`, else `$XDG_STATE_HOME/steerable-bridge/sessions.db`
    (`~/.local/state/...` when XDG_STATE_HOME is unset or not absolute)."""
    from steerable_bridge.commands.settings import SessionSettings

    configured = SessionSettings.lenient().storage
    if configured:
        return configured
    return os.path.join(state_dir(), "sessions.db")


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        default=default_storage(),
        help="where sessions live: a SQLite file shared safely by several processes on one"
        " machine, postgresql://user:password@host/db shared by several machines (needs the"
        " postgresql extra), or 'memory' (gone when the process exits); default"
        " $STEERABLE_STORAGE, else $XDG_STATE_HOME/steerable-bridge/sessions.db (now: %(default)s)",
    )


STORAGE_SCHEMES = ("postgresql", "postgres")
"""URL schemes `--storage` serves; anything else that looks like a URL is refused by name."""


def state_dir() -> str:
    """The agent's state folder: `$XDG_STATE_HOME/steerable-bridge` (`~/.local/state/...`
    when XDG_STATE_HOME is unset or not absolute; `settings.PathSettings`)."""
    from steerable_bridge.commands.settings import PathSettings

    return PathSettings.lenient().state_dir()


def approvals_path(spec: str) -> str | None:
    """Where "always" answers per project are kept: `approvals.json` beside a SQLite store,
    in the default state folder for a PostgreSQL one, nowhere for `memory`."""
    if spec == "memory":
        return None
    if _scheme(spec) is not None:
        return os.path.join(state_dir(), "approvals.json")
    return os.path.join(
        os.path.dirname(os.path.abspath(os.path.expanduser(spec))), "approvals.json"
    )


def build_approvals(spec: str) -> ApprovalMemory | None:
    """The project approvals kept for storage `spec` (see `approvals_path`), signed with
    the key in the state folder (`approval_file.py`)."""
    path = approvals_path(spec)
    if path is None:
        return None
    from steerable_bridge.adapters.storage.approval_file import ApprovalFile

    return ApprovalFile(path, os.path.join(state_dir(), "approvals.key"))


def protect_agent_files(spec: str, spill_root: str) -> None:
    """Tell every workspace which files are this agent's own (`agent_files.py`): the state
    folder, the spill folder, the SQLite store with its -wal/-shm/-journal siblings, and the
    approvals file with its lock and temporary files — wherever `--storage` put them."""
    from steerable_bridge.adapters.tools.agent_files import AGENT_FILES

    AGENT_FILES.keep_tree(state_dir(), "state folder")
    AGENT_FILES.keep_tree(spill_root, "tool-output spill folder")
    AGENT_FILES.keep_file(os.path.join(state_dir(), "approvals.key"), "approvals key")
    approvals = approvals_path(spec)
    if approvals is not None:
        AGENT_FILES.keep_file(approvals, "approvals file")
    if spec != "memory" and _scheme(spec) is None:
        AGENT_FILES.keep_file(os.path.abspath(os.path.expanduser(spec)), "session store")


def build_store(spec: str) -> SessionStore:
    """`memory`, a `postgresql://` URL, or the SQLite store at a file path (created on first
    use). A value with any other URL scheme (`mysql://...`) is refused, never taken for a
    file path."""
    if spec == "memory":
        from steerable_bridge.adapters.storage.memory import MemoryStore

        return MemoryStore()
    scheme = _scheme(spec)
    if scheme in STORAGE_SCHEMES:
        from steerable_bridge.adapters.storage.postgres import PostgresStore
        from steerable_bridge.runtime.ports.storage import StoreError

        try:
            return PostgresStore(spec)
        except StoreError as err:
            raise ConfigError(err.message) from None
    if scheme is not None:
        raise ConfigError(
            f"--storage {scheme}://... is not a store this build serves; use a file path"
            " (SQLite), postgresql://user:password@host/database, or memory"
        )
    from steerable_bridge.adapters.storage.sqlite import SqliteStore

    path = os.path.abspath(os.path.expanduser(spec))
    if os.path.isdir(path):
        raise ConfigError(
            f"--storage {spec!r} is a directory; give a file path such as {spec}/sessions.db"
        )
    return SqliteStore(path)


def check_storage(spec: str) -> None:
    """Refuse, with `ConfigError` naming the remedy, a store the command could not use: a
    file that is not a session store, a path that cannot be written, a PostgreSQL server
    that does not answer within the connect timeout (`adapters/storage/readiness.py`).
    Commands call it before they bind a port, answer an editor or start a turn."""
    if spec == "memory":
        return
    from steerable_bridge.adapters.storage import readiness

    scheme = _scheme(spec)
    if scheme in STORAGE_SCHEMES:
        from steerable_bridge.adapters.storage.postgres.driver import redact

        problem = readiness.postgres_problem(spec, redact(spec))
    elif scheme is not None:
        build_store(spec)  # refuses the scheme by name
        return
    else:
        path = os.path.abspath(os.path.expanduser(spec))
        if os.path.isdir(path):
            build_store(spec)  # refuses a directory with the remedy
        problem = readiness.sqlite_problem(path)
    if problem is not None:
        raise ConfigError(f"[{problem.code}] {problem.message}")


def _scheme(spec: str) -> str | None:
    """The URL scheme of `spec` (`postgresql` in `postgresql://...`), or None for a path."""
    head, sep, _ = spec.partition("://")
    if sep and head and head[0].isalpha() and all(c.isalnum() or c in "+-." for c in head):
        return head.lower()
    return None


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
