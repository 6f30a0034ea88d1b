"""Tools: what a model can call, and the context a tool runs in.

A `Tool` carries its name, description, JSON Schema parameters, an ACP kind, and an async
handler `handler(args, ctx) -> ToolResult`. The loop validates arguments against the schema
before calling the handler (invalid arguments become a tool error the model sees), bounds
the call with `timeout_s`, and cancels it through the turn's token. A handler reports a
failure with a result or by raising `ToolFailure(code, message)`; any other exception is
caught and logged as code `tool_exception`. `executor="frontend"` marks a tool that the
client runs (AG-UI frontend tools): the loop streams the call and stops the run for it.
A tool that runs commands sets `sandbox`, which tells the loop — before the call starts —
what will confine them; the loop puts that on the `tool_started` event.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from steerable_bridge.runtime.encoding.strict_json import JsonRefused, loads_strict
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.events import ToolExecutor
from steerable_bridge.runtime.ports.environment import Environment
from steerable_bridge.runtime.ports.model import ToolSpec
from steerable_bridge.runtime.values import (
    Location,
    PlanEntry,
    Sandbox,
    ToolContent,
    ToolError,
    ToolKind,
    canonical_json,
)

__all__ = [
    "READ_ONLY_KINDS",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolHandler",
    "ToolResult",
    "parse_arguments",
    "schema_error",
]

READ_ONLY_KINDS: frozenset[ToolKind] = frozenset({"read", "search", "think", "fetch"})
"""Kinds that never need permission."""


class ToolFailure(CodedError):
    """Raised by a handler for an expected failure: stable `code`, message with the remedy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool returns. `error` set means the call failed (the model still sees content)."""

    content: tuple[ToolContent, ...] = ()
    raw_output_json: str | None = None
    error: ToolError | None = None


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """What a running tool may use: its ids, the workspace, and ways to report progress."""

    session_id: str
    run_id: str
    call_id: str
    cwd: str
    environment: Environment | None
    output: Callable[[tuple[ToolContent, ...]], Awaitable[None]]
    """Stream progress content (logged as `tool_output`)."""
    update_plan: Callable[[tuple[PlanEntry, ...]], Awaitable[None]]
    """Replace the session's plan (logged as `plan_updated`)."""
    patch_state: Callable[[JsonValue], Awaitable[None]]
    """Apply a JSON Patch to the shared state (logged as `state_delta`)."""
    state: Callable[[], JsonValue]
    """The shared state as it is now."""


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]
ToolExposure = Literal["direct", "deferred", "hidden", "auto"]


async def _no_handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    raise ToolFailure("frontend_tool", "this tool runs in the client; the server cannot run it")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable tool. `read_only=None` derives it from `kind`."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    kind: ToolKind = "other"
    handler: ToolHandler = _no_handler
    read_only: bool | None = None
    parallel_safe: bool = False
    timeout_s: float = 120.0
    executor: ToolExecutor = "backend"
    title: Callable[[Mapping[str, Any]], str] | None = None
    locations: Callable[[Mapping[str, Any]], tuple[Location, ...]] | None = None
    sandbox: Callable[[Environment | None], Awaitable[Sandbox]] | None = None
    """For tools that run commands: what confines them, given the session's environment."""
    exposure: ToolExposure = "direct"
    """Whether steps offer it: `direct`, `deferred` (behind `tool_search`), `hidden`, or
    `auto` (direct while the offered schemas fit the budget; see `exposure.py`)."""

    @property
    def needs_permission(self) -> bool:
        if self.read_only is not None:
            return not self.read_only
        return self.kind not in READ_ONLY_KINDS

    def spec(self) -> ToolSpec:
        """How the model sees this tool."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters_json=canonical_json(dict(self.parameters)),
        )

    _compiled: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)
    """The parameters schema's validator, compiled on the first call and kept (one entry)."""

    def argument_error(self, args: Mapping[str, Any]) -> str | None:
        """Why `args` do not match the parameters schema ("path: message"), or None."""
        if not self._compiled:
            self._compiled.append(_validator(canonical_json(dict(self.parameters))))
        return _first_error(self._compiled[0], args)

    def describe(self, args: Mapping[str, Any]) -> tuple[str, tuple[Location, ...]]:
        """A title a person can read ("Read src/app.py") and the locations touched."""
        try:
            title = self.title(args) if self.title else _default_title(self.name, args)
            locations = self.locations(args) if self.locations else ()
        except (KeyError, TypeError, ValueError, AttributeError):  # unchecked arguments yet
            return _default_title(self.name, args), ()
        if not isinstance(title, str):
            title = _default_title(self.name, args)
        return title, tuple(_typed(loc) for loc in locations if isinstance(loc.path, str))


def _typed(location: Location) -> Location:
    """The location as the log can store it: a line that is not a positive int is dropped
    (the arguments it came from are not checked yet; a list there would spoil the log)."""
    line = location.line
    if line is None or (type(line) is int and line >= 1):
        return location
    return Location(path=location.path, line=None)


def parse_arguments(text: str) -> dict[str, Any] | None:
    """A call's argument text as a JSON object ({} when empty); None when it is not one."""
    if not text.strip():
        return {}
    try:  # a model's text: refuse NaN, lone surrogates and nesting that would recurse away
        value = loads_strict(text)
    except JsonRefused:
        return None
    return value if isinstance(value, dict) else None


class _BrokenSchema:
    """Stands in for the validator of a schema that is itself invalid: every call fails."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    import jsonschema  # imported on first use: it costs ~100 ms of every process start

    schema = json.loads(schema_json)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as err:
        return _BrokenSchema(err.message)
    return jsonschema.Draft202012Validator(schema)


def schema_error(schema_json: str, args: Mapping[str, Any]) -> str | None:
    """Why `args` do not match a JSON Schema given as canonical JSON text, or None."""
    return _first_error(_validator(schema_json), args)


def _first_error(validator: Any, args: Mapping[str, Any]) -> str | None:
    import jsonschema

    if isinstance(validator, _BrokenSchema):
        return (
            f"(schema): the tool's own parameters schema is invalid ({validator.problem}), so"
            " no call can be checked; do not call this tool again"
        )
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


def _default_title(name: str, args: Mapping[str, Any]) -> str:
    words = name.replace("_", " ").strip().capitalize() or name
    first = next((v for v in args.values() if isinstance(v, str) and v), None)
    if first is not None:
        short = first if len(first) <= 60 else first[:57] + "..."
        return f"{words}: {short}"
    return words
