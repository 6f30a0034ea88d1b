"""Every environment variable the product reads itself, as one typed, validated settings model.

`load_settings(env)` reads the process environment (or `env`) once and returns `Settings`:
seven groups of `pydantic-settings` fields (the agent, the model providers, sessions, the
processes tools start, `serve`, logs, the agent's folders), one field per variable with its
type, default and a one-line description. A bad value is a `SettingsError` with one line
per bad variable (the variable, the value, what to set instead; the parsers are in
`setting_values.py`); the CLI prints them and exits 2 before a command does anything. The
commands hand each group, or the typed objects made of it, down to what it configures; the
HTTP model adapters get the provider group as the mapping they configure from
(`ProviderSettings.environ()`, overlaid with stored credentials by `credentials.ModelEnv`).
Flags win over variables: option defaults come from `lenient()`, which never raises (a bad
value falls back to its default; the strict load reports it). `readme_table()` renders
README.md's Configuration table from the fields (`python -m steerable_bridge.commands.settings
--readme` prints it, `--write-readme` rewrites it). Never imports the runtime or an adapter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from steerable_bridge.commands import setting_values as v
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.setting_values import Parse

__all__ = [
    "AgentSettings",
    "LogSettings",
    "PathSettings",
    "ProviderSettings",
    "ServeSettings",
    "SessionSettings",
    "Settings",
    "SettingsError",
    "ToolProcessSettings",
    "current_settings",
    "lenient_settings",
    "load_settings",
    "readme_table",
    "variables",
]


class SettingsError(ConfigError, ValueError):
    """Bad values in the environment: `problems` holds one line per bad variable (a
    `ConfigError` for the CLI, a `ValueError` for callers that parse values)."""

    def __init__(self, problems: Sequence[str], names: Sequence[str] = ()) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)
        self.names = tuple(names)


def setting(
    variable: str,
    default: Any,
    description: str,
    *,
    flag: str = "",
    accepts: str = "",
    shown: str | None = None,
    secret: bool = False,
) -> Any:
    """A field read from `variable`; `flag`, `accepts` and `shown` (the default as the README
    states it) are for `readme_table`. A `secret` never shows in the model's repr."""
    return Field(
        default,
        validation_alias=variable,
        description=description,
        repr=not secret,
        json_schema_extra={
            "flag": flag,
            "accepts": accepts,
            "shown": f"`{default}`" if shown is None else shown,
        },
    )


_SOURCE: ContextVar[Mapping[str, str] | None] = ContextVar("steerable_settings_env", default=None)
"""The mapping `load(env)` reads instead of the process environment, while it builds."""


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        super().__init__(settings_cls, case_sensitive=True)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._environ


G = TypeVar("G", bound="EnvGroup")


class EnvGroup(BaseSettings):
    """One group of settings, each field read from its own variable (the field's alias) and
    parsed by the `Parse` in its type; a blank value a parser calls unset is the default."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ = _SOURCE.get()  # no .env file, no secrets folder: the environment only
        return (init_settings, env_settings if environ is None else _MappingSource(cls, environ))

    @field_validator("*", mode="before")
    @classmethod
    def _parse(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str) or info.field_name is None:
            return value
        field = cls.model_fields[info.field_name]
        for item in field.metadata:
            if isinstance(item, Parse):
                parsed = item.parse(str(field.validation_alias), value)
                return field.default if parsed is None else parsed
        return value

    @classmethod
    def load(cls: type[G], env: Mapping[str, str] | None = None) -> G:
        """The group read from `env` (the process environment when None); SettingsError
        with one line per bad variable."""
        token = _SOURCE.set(env)
        try:
            return cls()
        except ValidationError as error:
            raise _problems(error) from None
        finally:
            _SOURCE.reset(token)

    @classmethod
    def lenient(cls: type[G], env: Mapping[str, str] | None = None) -> G:
        """The group with every bad value replaced by its default (never raises)."""
        try:
            return cls.load(env)
        except SettingsError as error:
            source = dict(os.environ if env is None else env)
            for name in error.names:
                source.pop(name, None)
            return cls.load(source)

    @classmethod
    def variables(cls) -> Iterator[tuple[str, FieldInfo]]:
        """(variable, field) in declaration order."""
        for field in cls.model_fields.values():
            yield str(field.validation_alias), field

    def environ(self) -> dict[str, str]:
        """The variables that were set, as text again (for readers that take a mapping)."""
        found: dict[str, str] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if name not in self.model_fields_set or value is None:
                continue
            if isinstance(value, bool):
                text = "1" if value else "0"
            elif isinstance(value, tuple):
                text = ",".join(value)
            else:
                text = str(value)
            found[str(field.validation_alias)] = text
        return found


def _problems(error: ValidationError) -> SettingsError:
    lines: list[str] = []
    names: list[str] = []
    for item in error.errors(include_url=False):
        name = str(item["loc"][0]) if item["loc"] else "?"
        cause = item.get("ctx", {}).get("error")
        if isinstance(cause, ValueError):
            lines.append(str(cause))
        else:
            lines.append(f"{name}={item.get('input')!r}: {item['msg']}")
        names.append(name)
    return SettingsError(lines, names)


SESSIONS_DEFAULT = 256
TTL_DEFAULT = 600.0
LINES_DEFAULT = 2000
BYTES_DEFAULT = 50_000
"""`AgentConfig`'s and `OutputLimits`' defaults (tests/commands/test_settings.py checks they
agree; the runtime is not imported here, so `acp` answers `initialize` without it)."""


class AgentSettings(EnvGroup):
    """The model route and how turns run."""

    model: Annotated[str, Parse(v.text)] = setting(
        "STEERABLE_MODEL",
        "demo:default",
        "model route",
        flag="`--model`",
        shown="`demo:default` (built in, keyless)",
    )
    approve: Annotated[Literal["ask", "all", "none"], Parse(v.choice("ask", "all", "none"))] = (
        setting("STEERABLE_APPROVE", "ask", "tool approval", flag="`--approve ask\\|all\\|none`")
    )
    model_deadline: Annotated[float, Parse(v.flag_seconds("--model-deadline"))] = setting(
        "STEERABLE_MODEL_DEADLINE",
        300.0,
        "one model call, connect to last byte, retries included (`openai:`, `anthropic:`;"
        " RUN_ERROR / `run_failed` `model_timeout` beyond, or a wrap-up answer while the soft"
        " timeout is on)",
        flag="`--model-deadline SECONDS`",
        shown="300",
    )
    model_idle_timeout: Annotated[float, Parse(v.flag_seconds("--model-idle-timeout"))] = setting(
        "STEERABLE_MODEL_IDLE_TIMEOUT",
        120.0,
        "longest wait for the model's next token (text, reasoning or tool-call delta; SSE"
        " comments, keep-alives, empty and usage-only chunks do not count)",
        flag="`--model-idle-timeout SECONDS`",
        shown="120",
    )
    quality: Annotated[str, Parse(v.text)] = setting(
        "STEERABLE_QUALITY",
        "auto",
        "model-quality layer: tool calls written as text, duplicate calls, error breaker,"
        " soft timeout, budgets ([docs/model-quality.md](docs/model-quality.md))",
        flag="`--quality auto\\|on\\|off[,NAME=VALUE...]` or a JSON object of its fields",
        shown="`auto`: on for `openai:` routes",
    )
    demo_pace_ms: Annotated[float, Parse(v.milliseconds)] = setting(
        "STEERABLE_DEMO_PACE_MS", 15.0, "demo model pace (ms per word)", shown="15"
    )


_WINDOW_REMEDY = (
    " — set STEERABLE_CONTEXT_WINDOW to the model's context window (such as 131072), or unset"
    " it for the provider's default"
)


class ProviderSettings(EnvGroup):
    """Where and how the HTTP model providers call (`openai:`, `openai-responses:`,
    `anthropic:`); a key or base URL saved by `steerable-bridge login` fills in for a
    provider none of whose variables is set (`credentials.py`)."""

    base_url: Annotated[str | None, Parse(v.url("http://127.0.0.1:11434/v1"))] = setting(
        "STEERABLE_BASE_URL",
        None,
        "OpenAI-compatible base URL",
        shown="`OPENAI_BASE_URL`, else the `login` one, else `https://api.openai.com/v1`",
    )
    openai_base_url: Annotated[str | None, Parse(v.url("https://api.openai.com/v1"))] = setting(
        "OPENAI_BASE_URL",
        None,
        "OpenAI-compatible base URL when `STEERABLE_BASE_URL` is unset",
        shown="the `login` one, else `https://api.openai.com/v1`",
    )
    api_key: Annotated[str | None, Parse(v.optional_text)] = setting(
        "STEERABLE_API_KEY",
        None,
        "API key (`openai:` routes; `anthropic:` ones when `ANTHROPIC_API_KEY` is unset)",
        shown="`OPENAI_API_KEY`, else the `login` one, else none (not needed on loopback)",
        secret=True,
    )
    openai_api_key: Annotated[str | None, Parse(v.optional_text)] = setting(
        "OPENAI_API_KEY",
        None,
        "API key when `STEERABLE_API_KEY` is unset",
        shown="the `login` one, else none",
        secret=True,
    )
    model_images: Annotated[
        bool,
        Parse(v.switch(("1", "true", "yes"), ("0", "false", "no"), "1 or 0 (true or false)")),
    ] = setting(
        "STEERABLE_MODEL_IMAGES",
        True,
        "model sees images (`openai:` routes)",
        accepts="(`1` / `0`)",
        shown="`1`",
    )
    context_window: Annotated[int | None, Parse(v.tokens(1, _WINDOW_REMEDY))] = setting(
        "STEERABLE_CONTEXT_WINDOW",
        None,
        "model context window, for usage displays and compaction",
        shown="asked from the server (vLLM, llama.cpp, Ollama, LM Studio), else known model"
        " names, else unknown (`anthropic:` 200,000)",
    )
    anthropic_api_key: Annotated[str | None, Parse(v.optional_text)] = setting(
        "ANTHROPIC_API_KEY",
        None,
        "Anthropic API key (`anthropic:` routes)",
        shown="`STEERABLE_API_KEY`, else the `login` one, else none (not needed on loopback)",
        secret=True,
    )
    anthropic_base_url: Annotated[str | None, Parse(v.url("https://api.anthropic.com"))] = setting(
        "ANTHROPIC_BASE_URL",
        None,
        "Anthropic base URL",
        shown="the `login` one, else `https://api.anthropic.com`",
    )
    anthropic_models: Annotated[tuple[str, ...] | None, NoDecode, Parse(v.names)] = setting(
        "STEERABLE_ANTHROPIC_MODELS",
        None,
        "Anthropic routes offered to editors (ACP model option, `/model`)",
        accepts="(comma-separated names)",
        shown="with a key: `claude-sonnet-4-5`, `claude-opus-4-1`, `claude-haiku-4-5`;"
        " none without",
    )
    max_output_tokens: Annotated[int | None, Parse(v.tokens(1))] = setting(
        "STEERABLE_MAX_OUTPUT_TOKENS",
        None,
        "answer length cap (`anthropic:` routes)",
        shown="8192",
    )
    thinking_budget: Annotated[int | None, Parse(v.tokens(1024))] = setting(
        "STEERABLE_THINKING_BUDGET",
        None,
        "extended thinking budget (`anthropic:` routes)",
        accepts="(tokens, at least 1024)",
        shown="off",
    )
    prompt_cache: Annotated[
        bool, Parse(v.switch(("on", "1", "true"), ("off", "0", "false"), "on or off"))
    ] = setting(
        "STEERABLE_PROMPT_CACHE",
        True,
        "prompt-cache anchors (`anthropic:` routes)",
        accepts="(`on` / `off`)",
        shown="`on`",
    )
    prompt_cache_ttl: Annotated[Literal["5m", "1h"], Parse(v.cache_ttl)] = setting(
        "STEERABLE_PROMPT_CACHE_TTL",
        "5m",
        "prompt-cache lifetime",
        accepts="(`5m` / `1h`)",
    )


class SessionSettings(EnvGroup):
    """Where sessions live and what a process keeps of them."""

    storage: Annotated[str | None, Parse(v.optional_text)] = setting(
        "STEERABLE_STORAGE",
        None,
        "session storage: a SQLite file, a PostgreSQL database (`pip install"
        " 'steerable-bridge[postgresql]'`), or memory; any other URL scheme is refused",
        flag="`--storage PATH\\|postgresql://USER:PASSWORD@HOST/DB\\|memory`",
        shown="`$XDG_STATE_HOME/steerable-bridge/sessions.db` (else `~/.local/state/...`)",
    )
    session_cache: Annotated[int, Parse(v.whole(1, "a whole number of sessions"))] = setting(
        "STEERABLE_SESSION_CACHE",
        SESSIONS_DEFAULT,
        "idle sessions (and AG-UI threads) kept in memory; beyond, the oldest reload from"
        " storage when used",
        shown=str(SESSIONS_DEFAULT),
    )
    session_ttl: Annotated[float, Parse(v.seconds_above_zero)] = setting(
        "STEERABLE_SESSION_TTL",
        TTL_DEFAULT,
        "seconds an idle session stays in memory",
        shown=f"{TTL_DEFAULT:g}",
    )
    tool_output_lines: Annotated[int, Parse(v.whole(10, "a whole number of lines"))] = setting(
        "STEERABLE_TOOL_OUTPUT_LINES",
        LINES_DEFAULT,
        "largest tool result the model sees, in lines (longer ones are cut in the middle, the"
        " full text kept for `read_file`)",
        shown=f"{LINES_DEFAULT:,}",
    )
    tool_output_bytes: Annotated[int, Parse(v.whole(1000, "a whole number of bytes"))] = setting(
        "STEERABLE_TOOL_OUTPUT_BYTES",
        BYTES_DEFAULT,
        "largest tool result the model sees, in bytes",
        shown=f"{BYTES_DEFAULT:,}",
    )
    compaction: Annotated[
        bool,
        Parse(
            v.switch(("1", "true", "yes", "on"), ("0", "false", "no", "off"), "1 or 0"),
        ),
    ] = setting(
        "STEERABLE_COMPACTION",
        True,
        "automatic compaction (pressure, overflow recovery, micro)",
        accepts="(`1` / `0`)",
        shown="`1`",
    )
    compact_threshold: Annotated[float, Parse(v.share)] = setting(
        "STEERABLE_COMPACT_THRESHOLD",
        0.8,
        "compact when the next request passes this share of the window",
    )
    compact_micro_every: Annotated[int, Parse(v.steps)] = setting(
        "STEERABLE_COMPACT_MICRO_EVERY",
        0,
        "fold old tool results every N steps (micro compaction)",
        shown="`0` (off)",
    )


class ToolProcessSettings(EnvGroup):
    """What the processes tools start (commands, stdio MCP servers) may see and reach."""

    pass_env: Annotated[tuple[str, ...], NoDecode, Parse(v.names)] = setting(
        "STEERABLE_PASS_ENV",
        (),
        "secret-looking variables commands and MCP servers may still see (`acp`, `serve`)",
        flag="`--pass-env NAME,...`",
        shown="none: every `*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, `*CREDENTIAL*`"
        " variable (and `SSH_AUTH_SOCK`) is removed",
    )
    sandbox: Annotated[
        Literal["auto", "require", "off"], Parse(v.choice("auto", "require", "off"))
    ] = setting(
        "STEERABLE_SANDBOX",
        "auto",
        "sandbox for commands and stdio MCP servers (`acp`, `serve`): bubblewrap when it works"
        " here, else unconfined with a warning / always (refuse them without it) / never — see"
        " [what each mode exposes](#what-each-sandbox-mode-exposes)",
        flag="`--sandbox auto\\|require\\|off`",
    )
    sandbox_net: Annotated[Literal["deny", "allow"], Parse(v.choice("deny", "allow"))] = setting(
        "STEERABLE_SANDBOX_NET",
        "deny",
        "network inside the command sandbox",
        flag="`--sandbox-net deny\\|allow`",
    )
    mcp_net: Annotated[Literal["deny", "allow"], Parse(v.choice("deny", "allow"))] = setting(
        "STEERABLE_MCP_NET",
        "allow",
        "network inside a stdio MCP server's sandbox (a server's"
        " `_meta.steerable.network: true\\|false` overrides it)",
        flag="`--mcp-net deny\\|allow`",
    )


class ServeSettings(EnvGroup):
    """The AG-UI server (`serve`) and remote ACP (`acp --listen`)."""

    token: Annotated[str | None, Parse(v.optional_text)] = setting(
        "STEERABLE_TOKEN",
        None,
        "bearer token of `serve` and `acp --listen` (`GET /health` without it answers only `ok`)",
        flag="`serve --token`, `acp --listen ... --token`",
        shown="none (no auth)",
        secret=True,
    )
    metrics_token: Annotated[str | None, Parse(v.optional_text)] = setting(
        "STEERABLE_METRICS_TOKEN",
        None,
        "bearer token for `GET /metrics`",
        flag="`serve --metrics-token`",
        shown="single-user mode: the `--token`; else none",
        secret=True,
    )
    workers: Annotated[int, Parse(v.workers)] = setting(
        "STEERABLE_WORKERS",
        1,
        "AG-UI server processes on the port, sharing the store",
        flag="`serve --workers N`",
        shown="1",
    )
    max_runs: Annotated[int, Parse(v.run_count)] = setting(
        "STEERABLE_MAX_RUNS",
        256,
        "AG-UI runs streaming at once per process; beyond, `POST /agent` answers 503"
        " (`too_many_runs`, `Retry-After: 5`). A stream buffers at most 64 KiB for a slow"
        " client, then the run waits; a client that reads nothing for 30 s has its run"
        " cancelled and its connection dropped",
        flag="`serve --max-runs N` (0 = no limit)",
        shown="256",
    )
    max_head: Annotated[int, Parse(v.flag_whole("--max-head", 1024))] = setting(
        "STEERABLE_MAX_HEAD",
        32 * 1024,
        "AG-UI request head (request line + headers), checked before any auth; 431 beyond",
        flag="`serve --max-head BYTES`",
        shown="32768",
    )
    head_timeout: Annotated[float, Parse(v.flag_seconds("--head-timeout"))] = setting(
        "STEERABLE_HEAD_TIMEOUT",
        10.0,
        "time to send a request head (from connect or the previous response); 408 and close beyond",
        flag="`serve --head-timeout SECONDS`",
        shown="10",
    )
    body_timeout: Annotated[float, Parse(v.flag_seconds("--body-timeout"))] = setting(
        "STEERABLE_BODY_TIMEOUT",
        30.0,
        "time to send a body after its head (a `Content-Length` never met); 408 beyond",
        flag="`serve --body-timeout SECONDS`",
        shown="30",
    )
    max_connections: Annotated[int | None, Parse(v.flag_whole("--max-connections", 1))] = setting(
        "STEERABLE_MAX_CONNECTIONS",
        None,
        "connections open at once; past it the one that has waited longest for its head is"
        " dropped (408), and when all are busy the newcomer gets 503 `Retry-After: 1`; idle"
        " kept-alive connections close after 5 s",
        flag="`serve --max-connections N`",
        shown="what the fd limit leaves room for: limit - open - 3 * accept burst (limit/16)"
        " - limit/8 (about 170 at `ulimit -n 256`; `serve` logs the figure at start)",
    )


class LogSettings(EnvGroup):
    """What `acp` and `serve` log, where, and how."""

    level: Annotated[
        Literal["debug", "info", "warning", "error"] | None,
        Parse(v.choice("debug", "info", "warning", "error", fold=True)),
    ] = setting(
        "STEERABLE_LOG",
        None,
        "log level (stderr)",
        flag="`acp` / `serve` `--log-level`",
        shown="`warning` (`acp`), `info` (`serve`)",
    )
    file: Annotated[str | None, Parse(v.optional_text)] = setting(
        "STEERABLE_LOG_FILE",
        None,
        "also write the log to this file",
        flag="`acp` / `serve` `--log-file`",
        shown="none",
    )
    format: Annotated[Literal["text", "json"], Parse(v.choice("text", "json", fold=True))] = (
        setting(
            "STEERABLE_LOG_FORMAT",
            "text",
            "log format (session, run and trace id on every line)",
            flag="`acp` / `serve` `--log-format text\\|json`",
        )
    )


class PathSettings(EnvGroup):
    """Where the agent keeps its own files (the XDG base directories)."""

    state_home: Annotated[str | None, Parse(v.optional_text)] = setting(
        "XDG_STATE_HOME",
        None,
        "base of the state folder `steerable-bridge/` (session store, approvals, bridge"
        " stores, full tool outputs); a relative path is ignored",
        shown="`~/.local/state`",
    )
    config_home: Annotated[str | None, Parse(v.optional_text)] = setting(
        "XDG_CONFIG_HOME",
        None,
        "base of the credentials `login` saves (`steerable-bridge/credentials.json`); a"
        " relative path is ignored",
        shown="`~/.config`",
    )

    def state_dir(self) -> str:
        """`$XDG_STATE_HOME/steerable-bridge`, else `~/.local/state/steerable-bridge`."""
        state = self.state_home or ""
        base = (
            state
            if os.path.isabs(state)
            else os.path.join(os.path.expanduser("~"), ".local", "state")
        )
        return os.path.join(base, "steerable-bridge")


@dataclass(frozen=True, slots=True)
class Settings:
    """Every group, read from one environment."""

    agent: AgentSettings
    providers: ProviderSettings
    sessions: SessionSettings
    tools: ToolProcessSettings
    serve: ServeSettings
    logs: LogSettings
    paths: PathSettings


GROUPS: tuple[type[EnvGroup], ...] = (
    AgentSettings,
    ProviderSettings,
    SessionSettings,
    ToolProcessSettings,
    ServeSettings,
    LogSettings,
    PathSettings,
)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Every group read from `env` (the process environment when None); one
    `SettingsError` listing every bad variable of every group."""
    built: list[EnvGroup] = []
    problems: list[str] = []
    names: list[str] = []
    for group in GROUPS:
        try:
            built.append(group.load(env))
        except SettingsError as error:
            problems.extend(error.problems)
            names.extend(error.names)
    if problems:
        raise SettingsError(problems, names)
    return Settings(*built)  # type: ignore[arg-type]


def current_settings(args: object = None) -> Settings:
    """The settings the CLI validated for this command (`args.settings`), else read from
    the environment now; a bad value is a `SettingsError` (a `ConfigError`, one line each)."""
    found = getattr(args, "settings", None)
    return found if found is not None else load_settings()


def lenient_settings(env: Mapping[str, str] | None = None) -> Settings:
    """`load_settings` with every bad value replaced by its default (never raises): the
    defaults of the command-line options, computed before a command can report anything."""
    return Settings(*(group.lenient(env) for group in GROUPS))  # type: ignore[arg-type]


def variables() -> list[str]:
    """Every variable the model reads, in table order."""
    return [name for group in GROUPS for name, _ in group.variables()]


def readme_table() -> str:
    """README.md's Configuration table of the variables: one row per field, `| setting |
    flag | environment | default |`, from each field's description and README notes."""
    rows = ["| setting | flag | environment | default |", "|---|---|---|---|"]
    for group in GROUPS:
        for name, field in group.variables():
            notes = field.json_schema_extra
            assert isinstance(notes, dict)
            environment = f"`{name}` {notes['accepts']}".strip()
            rows.append(
                f"| {field.description} | {notes['flag']} | {environment} | {notes['shown']} |"
            )
    return "\n".join(rows) + "\n"


TABLE_START = (
    "<!-- generated from steerable_bridge/commands/settings.py by"
    " `uv run python -m steerable_bridge.commands.settings --write-readme`; edit the fields,"
    " not this table -->"
)
TABLE_END = "<!-- end of the generated settings table -->"
REGENERATE = "uv run python -m steerable_bridge.commands.settings --write-readme"
"""The command that rewrites README.md's table (tests/commands/test_settings.py names it)."""


def readme_block(readme: str) -> str | None:
    """The generated table as README.md holds it (between the markers), or None."""
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        return None
    return readme[start + len(TABLE_START) : end].strip("\n") + "\n"


def with_table(readme: str) -> str:
    """README.md's text with the table between the markers regenerated."""
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {TABLE_START!r} ... {TABLE_END!r} markers")
    return readme[: start + len(TABLE_START)] + "\n" + readme_table() + readme[end:]


def main(argv: Sequence[str] | None = None) -> int:
    """`--readme` prints the table, `--write-readme [PATH]` rewrites it in README.md, and
    `--check` validates this environment (one line per bad variable, exit 2)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ["--readme"]:
        sys.stdout.write(readme_table())
        return 0
    if arguments[:1] == ["--write-readme"] and len(arguments) <= 2:
        from pathlib import Path

        path = Path(arguments[1] if len(arguments) == 2 else "README.md")
        path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if arguments == ["--check"]:
        try:
            load_settings()
        except SettingsError as error:
            for line in error.problems:
                print(f"steerable-bridge: {line}", file=sys.stderr)
            return 2
        return 0
    print(
        "usage: python -m steerable_bridge.commands.settings"
        " --readme | --write-readme [README.md] | --check",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
