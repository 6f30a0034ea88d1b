"""The ACP transport reaches the agent through the agent port only (`runtime/ports/port.py`).

Every module under `transports/acp` is parsed; each import of the runtime must be one of
`ALLOWED` below, and no module may read or set the runtime objects' insides the port hides
(a session's log, facts, router, policy, environment, extra tools, compactor; the agent's
cross-process helpers). So the same transport serves our runtime (`LocalPort`) and the
bridges behind the port (an AG-UI endpoint behind `acp --agui-url`). The ACP bridge in
`transports/acp/bridge` is left out: it is a turn engine the runtime runs (behind
`LocalPort`), the far side of the port rather than a user of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "steerable_bridge"
ACP = PACKAGE / "transports" / "acp"
RUNTIME = "steerable_bridge.runtime"

ANY = None
ALLOWED: dict[str, frozenset[str] | None] = {
    # The port itself and the plain values its methods take and return.
    "port": ANY,
    "turn": frozenset({"TurnInput", "RunOutcome", "EventSink"}),  # not TurnContext / engines
    "cancel": ANY,  # the CancelToken a transport hands `prompt`
    "events": ANY,  # the LoopEvents `prompt` streams and `events_after` replays
    "values": ANY,  # content parts, commands, usage
    "model": frozenset({"ModelInfo"}),  # what `model_info` answers, not providers
    # Errors the port documents, and the page `list` returns.
    "storage": frozenset(
        {"SessionBusy", "SessionOwned", "SessionNotFound", "StoreError", "SessionPage"}
    ),
    "routing": frozenset({"RouteError"}),
    # What a transport lends a conversation through `Attachments`: ports it implements.
    "permissions": frozenset({"Asker", "PermissionRequest", "PermissionAnswer"}),
    "questions": frozenset({"Questioner", "QuestionRequest", "QuestionAnswer"}),
    "environment": ANY,  # the Environment port `ClientEnvironment` implements
    "tools": frozenset({"Tool"}),
    # Pure functions over values.
    "codec": ANY,  # LoopEvents as JSON (`_steerable/event`, `_meta.steerable.event`)
    "replay": frozenset({"coalesce_deltas", "Coalesced"}),  # not visible_log (reads the log)
    "strict_json": ANY,  # JSON that every client can parse
    "errors": frozenset({"CodedError"}),  # the base of every coded error
}
"""Runtime module, by its own name (unique across the runtime's rooms) → the names a
transport may import from it (ANY: the whole module). Everything else — agent, session, log,
loop, projection, conversations, the store's internals — is the port implementation's business."""

HIDDEN = frozenset(
    {
        "log",
        "facts",
        "router",
        "policy",
        "extra_tools",
        "compactor",
        "owner_elsewhere",
        "relay_signals",
        "load_session",
        "list_sessions",
    }
)
"""Attributes of runtime objects the port hides: no transport module reads or sets them."""


def _is_package(module: str) -> bool:
    """Whether `module` is the runtime or one of its rooms, so `from module import x` names
    the module `module.x` when `x` is one."""
    if module != RUNTIME and not module.startswith(RUNTIME + "."):
        return False
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").is_file()


def violations(path: Path) -> list[str]:
    """What in `path` goes around the port (empty when nothing does)."""
    found: list[str] = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.extend(_check(path, node, alias.name, None))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _is_package(node.module):  # `from steerable_bridge.runtime import events`
                for alias in node.names:
                    found.extend(_check(path, node, f"{node.module}.{alias.name}", None))
            else:
                names = frozenset(alias.name for alias in node.names)
                found.extend(_check(path, node, node.module, names))
        elif isinstance(node, ast.Attribute) and node.attr in HIDDEN:
            found.append(f"{path.name}:{node.lineno} uses .{node.attr}")
    return found


def _check(path: Path, node: ast.stmt, module: str, names: frozenset[str] | None) -> list[str]:
    if module != RUNTIME and not module.startswith(RUNTIME + "."):
        return []
    where = f"{path.name}:{node.lineno}"
    part = module.rsplit(".", 1)[-1]
    if part not in ALLOWED:
        return [f"{where} imports {module}"]
    allowed = ALLOWED[part]
    if allowed is ANY:
        return []
    if names is None:
        return [f"{where} imports all of {module} (only {sorted(allowed)})"]
    return [f"{where} imports {module}.{name}" for name in sorted(names - allowed)]


def test_every_acp_module_reaches_the_agent_through_the_port_only() -> None:
    # The bridge (`bridge/`) is not the serving side: it is a turn engine our runtime runs
    # behind `LocalPort`, so it records turns through the runtime's turn context.
    paths = sorted(p for p in ACP.rglob("*.py") if "bridge" not in p.relative_to(ACP).parts)
    assert len(paths) >= 10, "the ACP transport's modules were not found"
    assert [v for path in paths for v in violations(path)] == []


def test_the_checker_sees_each_way_around_the_port(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from steerable_bridge.runtime.agent_sessions.session import Session\n"
        "from steerable_bridge.runtime.ports.storage import claim_session, SessionBusy\n"
        "from steerable_bridge.runtime.agent_sessions import conversations\n"
        "import steerable_bridge.runtime.turns.turn\n"
        "def f(session):\n"
        "    from steerable_bridge.runtime.agent_sessions.routing import ModelRouter\n"
        "    session.policy = None\n"
        "    return session.log.view()\n"
    )
    good = tmp_path / "good.py"
    good.write_text(
        "from steerable_bridge.runtime import events as ev\n"
        "from steerable_bridge.runtime.ports.storage import SessionBusy\n"
        "from steerable_bridge.runtime.ports.port import AgentPort\n"
        "import logging\n"
        "log = logging.getLogger('x')\n"
    )
    assert sorted(violations(bad)) == [
        "bad.py:1 imports steerable_bridge.runtime.agent_sessions.session",
        "bad.py:2 imports steerable_bridge.runtime.ports.storage.claim_session",
        "bad.py:3 imports steerable_bridge.runtime.agent_sessions.conversations",
        "bad.py:4 imports all of steerable_bridge.runtime.turns.turn"
        " (only ['EventSink', 'RunOutcome', 'TurnInput'])",
        "bad.py:6 imports steerable_bridge.runtime.agent_sessions.routing.ModelRouter",
        "bad.py:7 uses .policy",
        "bad.py:8 uses .log",
    ]
    assert violations(good) == []
