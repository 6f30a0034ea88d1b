"""Tools (`runtime/ports/tools.py`): whether a tool needs permission follows its kind unless
`read_only` says otherwise; `spec` is how the model sees it; `argument_error` and
`schema_error` name the first mismatch as "path: message" (and say so when the tool's own
schema is broken); `parse_arguments` reads a call's text strictly as a JSON object ({} when
empty); `describe` gives a readable title and the locations touched, falling back to a
default title when the tool's own callables choke on unchecked arguments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from steerable_bridge.runtime.ports.tools import (
    READ_ONLY_KINDS,
    Tool,
    ToolFailure,
    parse_arguments,
    schema_error,
)
from steerable_bridge.runtime.values import Location, ToolKind, canonical_json

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "line": {"type": "integer", "minimum": 1}},
    "required": ["path"],
}


def tool(**options: Any) -> Tool:
    return Tool(name=options.pop("name", "read_file"), description="Reads a file", **options)


@pytest.mark.parametrize("kind", ["read", "search", "think", "fetch"])
def test_read_only_kinds_need_no_permission(kind: ToolKind) -> None:
    assert kind in READ_ONLY_KINDS
    assert not tool(kind=kind).needs_permission


@pytest.mark.parametrize("kind", ["edit", "delete", "move", "execute", "switch_mode", "other"])
def test_other_kinds_need_permission(kind: ToolKind) -> None:
    assert tool(kind=kind).needs_permission


def test_read_only_overrides_the_kind() -> None:
    assert not tool(kind="execute", read_only=True).needs_permission
    assert tool(kind="read", read_only=False).needs_permission


def test_the_spec_carries_the_schema_as_canonical_json() -> None:
    spec = tool(parameters=SCHEMA).spec()
    assert (spec.name, spec.description) == ("read_file", "Reads a file")
    assert spec.parameters_json == canonical_json(SCHEMA)
    assert json.loads(tool().spec().parameters_json) == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"path": "a.py"}, None),
        ({"path": "a.py", "line": 3}, None),
        ({}, "(root): 'path' is a required property"),
        ({"path": 7}, "path: 7 is not of type 'string'"),
        ({"path": "a.py", "line": 0}, "line: 0 is less than the minimum of 1"),
    ],
)
def test_argument_errors_name_the_place_and_the_problem(
    args: dict[str, Any], problem: str | None
) -> None:
    assert tool(parameters=SCHEMA).argument_error(args) == problem
    assert schema_error(canonical_json(SCHEMA), args) == problem


def test_a_broken_schema_fails_every_call_and_says_the_tool_is_at_fault() -> None:
    broken = tool(parameters={"type": "object", "properties": {"x": {"type": "nonsense"}}})
    problem = broken.argument_error({"x": 1})
    assert problem is not None and problem.startswith("(schema): ")
    assert "do not call this tool again" in problem


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("", {}),
        ("  \n", {}),
        ('{"path": "a.py"}', {"path": "a.py"}),
        ("[1, 2]", None),  # not an object
        ('"a.py"', None),
        ('{"path": "a.py"', None),  # cut off
        ('{"n": NaN}', None),  # not strict JSON
        ('{"s": "\\ud800"}', None),  # a lone surrogate
        ("[" * 100 + "]" * 100, None),  # too deep
    ],
)
def test_arguments_are_read_strictly_as_an_object(text: str, args: dict[str, Any] | None) -> None:
    assert parse_arguments(text) == args


def test_the_default_title_is_the_name_and_the_first_text_argument() -> None:
    assert tool().describe({"path": "src/app.py", "line": 3}) == ("Read file: src/app.py", ())
    assert tool().describe({"line": 3}) == ("Read file", ())
    long = "x" * 100
    assert tool().describe({"path": long})[0] == "Read file: " + "x" * 57 + "..."


def test_a_tools_own_title_and_locations_are_used_and_lines_made_storable() -> None:
    def title(args: Mapping[str, Any]) -> str:
        return f"Read {args['path']}"

    def locations(args: Mapping[str, Any]) -> tuple[Location, ...]:
        return (
            Location(path=args["path"], line=args.get("line")),
            Location(path="b.py", line=0),  # not a line: dropped
            Location(path=5, line=1),  # type: ignore[arg-type]  # not a path: left out
        )

    described = tool(title=title, locations=locations).describe({"path": "a.py", "line": 4})
    assert described == ("Read a.py", (Location(path="a.py", line=4), Location(path="b.py")))


def test_a_title_callable_that_chokes_on_unchecked_arguments_falls_back() -> None:
    def title(args: Mapping[str, Any]) -> str:
        return "Read " + args["path"]  # KeyError / TypeError on bad arguments

    def not_text(args: Mapping[str, Any]) -> Any:
        return 42

    assert tool(title=title).describe({"file": "a.py"}) == ("Read file: a.py", ())
    assert tool(title=not_text).describe({"path": "a.py"})[0] == "Read file: a.py"


@pytest.mark.anyio
async def test_a_frontend_tool_without_a_handler_refuses_to_run_on_the_server() -> None:
    with pytest.raises(ToolFailure) as refused:
        await tool(executor="frontend").handler({}, None)  # type: ignore[arg-type]
    assert refused.value.code == "frontend_tool" and "runs in the client" in str(refused.value)
