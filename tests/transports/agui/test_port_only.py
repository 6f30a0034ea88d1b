"""The AG-UI transport reaches the agent through the agent port only (issue 24 §1).

Every module under `transports/agui` is parsed with `ast`, and each import of a runtime
module must be on the list below (by the module's own name, whichever room holds it).
Allowed whole: the port itself, and the plain values and helpers a transport needs to speak
about a conversation without touching one — the event taxonomy (`events`, `codec` for its
JSON form), content values (`values`), a turn's input (`turn`, `tools` for the client's
frontend tools), the cancel token a run hands to `prompt` (`cancel`), and pure utilities
with no agent state (`idle`: the bounded map of threads; `strict_json`: request bodies;
`surrogates`: text repair for the wire; `errors`: the coded-error base; `tokens`: the
prompt-token estimate a model request sent by reference carries). Allowed by name only: the
errors the port documents and its page type, and `ToolSpec`, the plain value a request's
tools are. Everything that holds or runs a conversation — `agent`, `session`, `log`,
`conversations`, `loop`, `projection`, `replay`, `permissions`, the store itself — is out:
the transport never mutates runtime objects and never reads the log directly.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "steerable_bridge"
RUNTIME = "steerable_bridge.runtime"

WHOLE = frozenset(
    {"port", "events", "codec", "values", "turn", "tools", "cancel", "idle", "strict_json"}
    | {"surrogates", "errors", "tokens"}
)
"""Runtime modules the transport may import anything from (see the module docstring)."""

BY_NAME = {
    "storage": frozenset(
        {"SessionBusy", "SessionOwned", "SessionNotFound", "StoreError", "STORAGE_FULL"}
        | {"SessionPage"}
    ),
    "routing": frozenset({"RouteError"}),
    "model": frozenset({"ProviderError", "ToolSpec"}),
    "questions": frozenset({"ANSWER_PREFIX", "QuestionAnswer"}),  # a resume's answer value
}
"""Runtime modules the transport may import only these names from: errors, the page, and
the value a question's answer takes."""


def _is_package(module: str) -> bool:
    """Whether `module` is the runtime or one of its rooms, so `from module import x` names
    the module `module.x` when `x` is one."""
    if module != RUNTIME and not module.startswith(RUNTIME + "."):
        return False
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").is_file()


def runtime_imports(path: Path) -> list[tuple[str, str | None]]:
    """(runtime module, imported name or None for the module) for every import in `path`,
    at any depth (lazy imports count too)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(RUNTIME + "."):
                    found.append((alias.name.rsplit(".", 1)[-1], None))
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: use absolute imports"
            if _is_package(node.module):  # from steerable_bridge.runtime.encoding import codec
                found.extend((alias.name, None) for alias in node.names)
            elif node.module.startswith(RUNTIME + "."):
                module = node.module.rsplit(".", 1)[-1]
                found.extend((module, alias.name) for alias in node.names)
    return found


def offenders(path: Path) -> list[str]:
    bad = []
    for module, name in runtime_imports(path):
        if module in WHOLE:
            continue
        if name is not None and name in BY_NAME.get(module, ()):
            continue
        what = f"{RUNTIME}.{module}" + (f".{name}" if name else "")
        bad.append(f"{path.relative_to(PACKAGE.parent)} imports {what}")
    return bad


def test_the_agui_transport_imports_only_the_port_and_plain_values() -> None:
    agui = PACKAGE / "transports" / "agui"
    # The bridge (`bridge/`) is not the serving side: it is a turn engine our runtime runs
    # behind `LocalPort`, so it records turns through the runtime's turn context.
    paths = sorted(p for p in agui.rglob("*.py") if "bridge" not in p.relative_to(agui).parts)
    assert len(paths) > 10  # the check sees the transport
    found = [line for path in paths for line in offenders(path)]
    assert found == [], "\n".join(found)


def test_the_check_catches_a_reach_into_the_runtime(tmp_path: Path) -> None:
    sneaky = PACKAGE / "transports" / "agui" / "app.py"
    source = tmp_path / "sneaky.py"
    source.write_text(
        "from steerable_bridge.runtime.agent_sessions.agent import Agent\n"
        "from steerable_bridge.runtime.ports.storage import SessionBusy, claim_session\n"
        "from steerable_bridge.runtime.agent_sessions import session\n"
        "def later() -> None:\n"
        "    import steerable_bridge.runtime.session_log.log\n"
    )
    found = runtime_imports(source)
    assert ("agent", "Agent") in found and ("storage", "claim_session") in found
    assert ("session", None) in found and ("log", None) in found
    assert runtime_imports(sneaky)  # the real modules are read the same way
    allowed = [
        (m, n) for m, n in found if m in WHOLE or (n is not None and n in BY_NAME.get(m, ()))
    ]
    assert allowed == [("storage", "SessionBusy")]
