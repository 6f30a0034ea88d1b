"""The SDK private names `sdk_private.py` relies on still exist with the shape it expects, and
no other module of `steerable_bridge` touches an SDK private name.

A failure here names the installed `agent-client-protocol` version and the private name that
moved: the fix goes into `steerable_bridge/transports/acp/sdk_private.py` (or, better, onto
the public API the new SDK offers instead)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import importlib
import importlib.metadata
import inspect
import pathlib
from collections.abc import Iterator
from typing import Any, NoReturn

import acp
import pytest
from acp.agent.connection import AgentSideConnection
from acp.client.connection import ClientSideConnection
from acp.connection import Connection, StreamDirection, StreamEvent
from acp.http.server import AcpServer, ConnectionRegistry, ConnectionState

import steerable_bridge
from steerable_bridge.transports.acp import sdk_private
from steerable_bridge.transports.acp.server import GuardedTransport

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

INSTALLED = importlib.metadata.version("agent-client-protocol")
PACKAGE = pathlib.Path(steerable_bridge.__file__).parent
SDK = pathlib.Path(acp.__file__).parent
HOME = PACKAGE / "transports" / "acp" / "sdk_private.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's connections and HTTP core are asyncio-only


def moved(name: str, detail: str) -> NoReturn:
    pytest.fail(
        f"agent-client-protocol {INSTALLED}: the private `{name}` {detail} "
        f"(sdk_private.py was checked against {sdk_private.CHECKED_VERSION}); adapt "
        "steerable_bridge/transports/acp/sdk_private.py, or use the public API that replaced it",
        pytrace=False,
    )


@functools.cache
def self_attributes(cls: type) -> frozenset[str]:
    """The `_names` `cls` (SDK source) assigns on `self` or defines as methods (read once per
    class: the scan asks for each SDK ancestor of every class it meets)."""
    tree = ast.parse(inspect.getsource(cls))
    names = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    names |= {n.name for n in ast.walk(tree) if isinstance(n, functions)}
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def resolve(dotted: str) -> None:
    """Fail naming `dotted` unless it is a module attribute or an SDK class's private member."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for index, part in enumerate(parts[cut:], start=cut):
            if hasattr(target, part):
                target = getattr(target, part)
                continue
            last = index == len(parts) - 1
            if last and inspect.isclass(target) and part in self_attributes(target):
                return  # an instance attribute the class's own code sets
            moved(dotted, "is gone")
        return
    moved(dotted, "is gone (its module no longer imports)")


@pytest.mark.parametrize("name", sdk_private.PRIVATE_NAMES)
def test_every_private_name_still_exists(name: str) -> None:
    resolve(name)


def test_the_checked_version_is_the_installed_one() -> None:
    if INSTALLED != sdk_private.CHECKED_VERSION:
        moved(
            "names listed in sdk_private.PRIVATE_NAMES",
            f"were read against {sdk_private.CHECKED_VERSION}, not this release; re-read each "
            "and then raise CHECKED_VERSION",
        )


def test_sse_events_are_data_lines_and_comments() -> None:
    event = sdk_private.serialize_sse_event({"jsonrpc": "2.0", "method": "x"})
    if not (isinstance(event, bytes) and event.startswith(b"data: ") and event.endswith(b"\n\n")):
        moved("acp._sse.serialize_sse_event", f"now returns {event!r}, not b'data: ...\\n\\n'")
    keepalive = sdk_private.serialize_sse_keepalive()
    if not (isinstance(keepalive, bytes) and keepalive.startswith(b":")):
        moved("acp._sse.serialize_sse_keepalive", f"now returns {keepalive!r}, not an SSE comment")


async def test_memory_transports_are_linked_and_end_with_none() -> None:
    left, right = sdk_private.memory_transport_pair()
    for end in (left, right):
        if not isinstance(end, sdk_private.Transport):
            moved("acp._transport.Transport", f"no longer matches {type(end).__name__}")
    await left.send({"id": 1})
    if await right.receive() != {"id": 1}:
        moved("acp._transport.memory_transport_pair", "no longer links its two ends")
    await left.close()
    if await right.receive() is not None:
        moved("acp._transport.memory_transport_pair", "no longer ends the other side with None")


async def test_the_stdio_transport_is_an_sdk_transport() -> None:
    for method in ("send", "receive", "close"):
        if not hasattr(sdk_private.Transport, method):
            moved("acp._transport.Transport", f"has no `{method}` any more")
    reader = asyncio.StreamReader()
    if not isinstance(GuardedTransport(reader, object()), sdk_private.Transport):  # type: ignore[arg-type]
        moved("acp._transport.Transport", "no longer matches GuardedTransport")


def test_thread_streams_take_a_loop_and_a_limit() -> None:
    from acp.stdio import _windows_stdio_streams

    params = list(inspect.signature(_windows_stdio_streams).parameters)
    if params[:2] != ["loop", "limit"] or not inspect.iscoroutinefunction(_windows_stdio_streams):
        moved("acp.stdio._windows_stdio_streams", f"now takes {params}, not (loop, limit)")


async def test_connections_keep_a_json_rpc_connection_whose_handler_wraps() -> None:
    ours, theirs = sdk_private.memory_transport_pair()
    agent = AgentSideConnection(object(), ours, listening=False)  # type: ignore[arg-type]
    client = ClientSideConnection(object(), theirs)  # type: ignore[arg-type]
    try:
        for conn, name in ((agent, "AgentSideConnection"), (client, "ClientSideConnection")):
            raw = sdk_private.raw_connection(conn)
            if not isinstance(raw, Connection):
                moved(f"acp.{name.lower()[:5]}.connection.{name}._conn", f"is {type(raw)}")
        seen: list[str] = []

        def wrap(handler: Any) -> Any:
            async def handle(method: str, params: Any, is_notification: bool) -> Any:
                seen.append(method)
                return await handler(method, params, is_notification)

            return handle

        handler = sdk_private.raw_connection(agent)._handler
        if not callable(handler):
            moved("acp.connection.Connection._handler", f"is {handler!r}, not a callable")
        sdk_private.wrap_handler(agent, wrap)
        with pytest.raises(Exception):  # noqa: B017 - the SDK's own refusal; any kind will do
            await sdk_private.raw_connection(agent)._handler("no/such", {}, False)
        if seen != ["no/such"]:
            moved("acp.connection.Connection._handler", "is no longer what the connection calls")
        notify = sdk_private.raw_notify(agent)
        if notify is None:
            moved("acp.connection.Connection.send_notification", "is gone")
        if sdk_private.raw_notify(object()) is not None:
            pytest.fail("raw_notify of an object with no SDK connection must be None")
    finally:
        await agent.close()
        await client.close()


async def test_client_observers_are_a_public_connection_option() -> None:
    ours, theirs = sdk_private.memory_transport_pair()
    events: list[StreamEvent] = []
    client = ClientSideConnection(object(), ours, observers=[events.append])  # type: ignore[arg-type]
    try:
        await sdk_private.raw_connection(client).send_notification("x", {})
        if [e.direction for e in events] != [StreamDirection.OUTGOING]:
            moved("acp.connection.Connection(observers=...)", "no longer sees outgoing frames")
    finally:
        await client.close()
        await theirs.close()


async def test_pumped_state_sets_what_the_sdk_state_sets_and_routes_through_the_hook() -> None:
    sdk_state = ConnectionState("sdk", lambda conn: object())  # type: ignore[arg-type, return-value]
    server_side, pump_side = sdk_private.memory_transport_pair()
    seen: list[dict[str, Any]] = []
    pumped = asyncio.Event()

    class Recording(sdk_private.PumpedConnectionState):
        async def route_outbound(self, message: dict[str, Any]) -> None:
            seen.append(message)
            pumped.set()

    agent = AgentSideConnection(object(), server_side, listening=False)  # type: ignore[arg-type]
    ours = Recording("ours", pump_side=pump_side, agent_conn=agent, multiplex=False)
    try:
        missing = set(vars(sdk_state)) - set(vars(ours))
        if missing:
            moved("acp.http.server.ConnectionState.__init__", f"now also sets {sorted(missing)}")
        if not inspect.iscoroutinefunction(ConnectionState._route_outbound):
            moved("acp.http.server.ConnectionState._route_outbound", "is no longer a coroutine")
        ours.start()
        await server_side.send({"jsonrpc": "2.0", "method": "x"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pumped.wait(), 10)
        if seen != [{"jsonrpc": "2.0", "method": "x"}]:
            moved(
                "acp.http.server.ConnectionState._route_outbound", "is no longer what it pumps to"
            )
        if ours.multiplex is not None or ours.take_route("1") is not None:
            pytest.fail("a fresh SSE connection has no multiplex stream and no pending routes")
    finally:
        await ours.close()
        await sdk_state.close()


def test_the_registry_and_server_keep_their_state_where_we_reach_it() -> None:
    registry = sdk_private.OpenRegistry()
    if not isinstance(registry.connections, dict):
        moved("acp.http.server.ConnectionRegistry._connections", "is no longer a dict")
    server = AcpServer(lambda conn: object())  # type: ignore[arg-type, return-value]
    if not isinstance(server.registry, ConnectionRegistry):
        moved("acp.http.server.AcpServer._registry", "no longer backs `registry`")
    sdk_private.use_registry(server, registry)
    if server.registry is not registry:
        moved("acp.http.server.AcpServer._registry", "no longer backs `registry`")


# -- nothing else touches SDK private names -----------------------------------------------------


@functools.cache
def sdk_private_members() -> frozenset[str]:
    """Every `_name` the SDK's own code sets on `self` or defines as a method (the installed
    SDK does not change during a run: read once for the two tests that ask)."""
    names: set[str] = set()
    for path in SDK.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                names |= {
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                }
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def sdk_bases(nodes: list[ast.AST]) -> dict[str, set[str]]:
    """Class name → the private members of the SDK classes it derives from (directly, or
    through a name imported from `acp` or `sdk_private`); `nodes` are a module's, walked."""
    imported: dict[str, tuple[str, str]] = {}
    for node in nodes:
        if not (isinstance(node, ast.ImportFrom) and node.module):
            continue
        if node.module.split(".")[0] == "acp" or node.module.endswith("sdk_private"):
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    found: dict[str, set[str]] = {}
    for node in nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in imported:
                module, name = imported[base.id]
                cls = getattr(importlib.import_module(module), name, None)
                if not inspect.isclass(cls):
                    continue
                for ancestor in cls.__mro__:
                    if ancestor.__module__.split(".")[0] == "acp":
                        found.setdefault(node.name, set()).update(self_attributes(ancestor))
    return found


def violations(source: str, members: frozenset[str]) -> Iterator[str]:
    """Each use of an SDK private name in `source`, as `line: what`."""
    nodes = list(ast.walk(ast.parse(source)))
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("acp"):
            parts = node.module.split(".")
            if parts[0] == "acp" and any(p.startswith("_") for p in parts):
                yield f"{node.lineno}: from {node.module} import ..."
            for alias in node.names:
                if parts[0] == "acp" and alias.name.startswith("_"):
                    yield f"{node.lineno}: from {node.module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "acp" and any(p.startswith("_") for p in parts):
                    yield f"{node.lineno}: import {alias.name}"
        elif isinstance(node, ast.Attribute) and node.attr in members:
            base = ast.unparse(node.value)
            if base not in ("self", "cls"):
                yield f"{node.lineno}: {base}.{node.attr}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and ast.unparse(node.args[0]) not in ("self", "cls")
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in members
        ):
            yield f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})"
    bases = sdk_bases(nodes)
    for cls_node in nodes:
        if not (isinstance(cls_node, ast.ClassDef) and cls_node.name in bases):
            continue
        inherited = bases[cls_node.name]
        for node in ast.walk(cls_node):
            if isinstance(node, ast.Attribute) and node.attr in inherited:
                yield f"{node.lineno}: {cls_node.name} uses the SDK's {node.attr}"
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in inherited:
                yield f"{node.lineno}: {cls_node.name} overrides the SDK's {node.name}"


def test_the_scan_sees_each_kind_of_private_use() -> None:
    members = sdk_private_members()
    source = """
from acp._transport import Transport
from acp.stdio import _windows_stdio_streams
import acp._sse
from acp.http.server import ConnectionState
conn._conn._handler = wrap(conn._conn._handler)
notify = getattr(conn, "_conn", None)
class Mine(ConnectionState):
    def __init__(self):
        self._pump_side = None
    async def _route_outbound(self, message):
        pass
"""
    found = "\n".join(violations(source, members))
    for expected in (
        "from acp._transport",
        "import _windows_stdio_streams",
        "import acp._sse",
        "conn._conn._handler",
        "getattr(..., '_conn')",
        "Mine uses the SDK's _pump_side",
        "Mine overrides the SDK's _route_outbound",
    ):
        assert expected in found, f"the scan missed {expected!r}; it found:\n{found}"


def test_only_sdk_private_touches_sdk_private_names() -> None:
    members = sdk_private_members()
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for hit in violations(path.read_text(encoding="utf-8"), members)
    ]
    assert not found, (
        f"these use private names of agent-client-protocol {INSTALLED}; move each into "
        "steerable_bridge/transports/acp/sdk_private.py and import it from there:\n"
        + "\n".join(found)
    )
