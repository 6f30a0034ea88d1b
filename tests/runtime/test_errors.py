"""Every coded error shares one base: a stable code, the message a user reads, the remedy."""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import steerable_bridge
from steerable_bridge.adapters.llm.anthropic_wire import StreamFailure
from steerable_bridge.adapters.llm.responses_wire import ResponsesFailure
from steerable_bridge.runtime.agent_sessions.routing import RouteError
from steerable_bridge.runtime.encoding.strict_json import JsonRefused
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.environment import WorkspaceError
from steerable_bridge.runtime.ports.model import ProviderError
from steerable_bridge.runtime.ports.storage import SessionNotFound, SessionOwned, StoreError


def test_a_remedy_given_apart_ends_the_message() -> None:
    error = CodedError("storage_full", "the disk is full", "free some space")
    assert str(error) == error.message == "the disk is full; free some space"
    assert error.code == "storage_full" and error.remedy == "free some space"


def test_a_message_that_names_its_remedy_is_kept_as_written() -> None:
    error = RouteError("unknown_provider", "no provider 'x'; use openai:NAME")
    assert str(error) == "no provider 'x'; use openai:NAME" and error.remedy is None


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("rate_limited", "slow down; retry later", retryable=True),
        StoreError("storage_full", "full; free space"),
        SessionNotFound("s1"),
        SessionOwned("s1", "pid 7"),
        WorkspaceError("outside_workspace", "outside; use a path inside"),
        JsonRefused("invalid_json", "not JSON; send JSON"),
    ],
)
def test_each_layers_error_is_a_coded_error(error: CodedError) -> None:
    assert isinstance(error, CodedError) and error.code and str(error) == error.message


def test_refused_json_is_still_a_value_error() -> None:
    with pytest.raises(ValueError):
        raise JsonRefused("invalid_json", "not JSON; send JSON")


# -- the package's exception classes, read from its source ---------------------------------------

PACKAGE = Path(steerable_bridge.__file__).parent
GENERATED = PACKAGE / "transports" / "acp" / "schema"
"""The ACP schema models (generated; their `Error` is the JSON-RPC error object, not raised)."""

BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


@dataclass(frozen=True)
class ClassInfo:
    name: str
    where: str
    bases: tuple[str, ...]
    carries_code: bool


def carries_code(node: ast.ClassDef) -> bool:
    """Whether the class sets `self.code`, declares a `code` field or takes a `code` argument."""
    for item in ast.walk(node):
        sets_code = (
            isinstance(item, ast.Attribute)
            and item.attr == "code"
            and isinstance(item.ctx, ast.Store)
            and ast.unparse(item.value) == "self"
        )
        declares_code = isinstance(item, ast.AnnAssign) and ast.unparse(item.target) == "code"
        takes_code = (
            isinstance(item, ast.FunctionDef)
            and item.name == "__init__"
            and any(arg.arg == "code" for arg in item.args.args + item.args.kwonlyargs)
        )
        if sets_code or declares_code or takes_code:
            return True
    return False


def statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement in `tree` at any depth (a class is one), without walking expressions."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.stmt):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            pending.extend(getattr(node, field, ()))


@functools.cache
def package_classes() -> tuple[ClassInfo, ...]:
    """Every class of the package's source, read once for the tests below (it is immutable)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if GENERATED in path.parents:
            continue
        for node in statements(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = tuple(ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases)
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                found.append(ClassInfo(node.name, where, bases, carries_code(node)))
    return tuple(found)


def ancestors(info: ClassInfo, by_name: dict[str, list[ClassInfo]]) -> set[str]:
    """Every base name reachable from `info` (by name: error names are unique, see below)."""
    seen: set[str] = set()
    todo = list(info.bases)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for parent in by_name.get(name, []):
            todo.extend(parent.bases)
    return seen


def is_error_name(name: str) -> bool:
    return name.endswith(("Error", "Failure", "Refusal"))


def test_every_exception_that_carries_a_code_is_a_coded_error() -> None:
    classes = package_classes()
    by_name: dict[str, list[ClassInfo]] = {}
    for info in classes:
        by_name.setdefault(info.name, []).append(info)
    stray = [
        f"{info.where} {info.name}({', '.join(info.bases)})"
        for info in classes
        if info.name != "CodedError"
        and is_error_name(info.name)
        and info.carries_code
        and (ancestors(info, by_name) & BUILTIN_EXCEPTIONS)
        and "CodedError" not in ancestors(info, by_name)
    ]
    assert not stray, (
        "these exceptions carry a `code` but do not derive from "
        "steerable_bridge.runtime.errors.CodedError; derive them from it (code, message, "
        "remedy):\n" + "\n".join(stray)
    )


def test_no_class_is_named_after_a_builtin() -> None:
    shadows = [
        f"{info.where} {info.name}" for info in package_classes() if hasattr(builtins, info.name)
    ]
    assert not shadows, "these classes hide a builtin of the same name; rename them:\n" + (
        "\n".join(shadows)
    )


def test_no_two_error_classes_share_a_name() -> None:
    places: dict[str, list[str]] = {}
    for info in package_classes():
        if is_error_name(info.name):
            places.setdefault(info.name, []).append(info.where)
    shared = {name: where for name, where in places.items() if len(where) > 1}
    assert not shared, (
        "these error / refusal classes share a name, so a reader (and a catch site) cannot "
        f"tell them apart; name each for what it refuses: {shared}"
    )


def test_the_stream_failures_are_coded_errors() -> None:
    failure = StreamFailure("overloaded_error", "Overloaded")
    assert isinstance(failure, CodedError)
    assert failure.code == failure.error_type == "overloaded_error"
    assert str(failure) == failure.message == "Overloaded"
    refused = ResponsesFailure("context_length_exceeded", "too long")
    assert isinstance(refused, CodedError)
    assert (refused.code, refused.message) == ("context_length_exceeded", "too long")
