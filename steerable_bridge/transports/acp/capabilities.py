"""What the agent answers to `initialize`: version, identity, capabilities, auth methods.

One function, `initialize_response(info, model, workspaces=...)`, shared by the lazy front
(`front.py`, which answers before the runtime is loaded) and `AcpAgent`. Capabilities are
honest: prompts take text, resource links and embedded resources, and images only when the
default model reads them; sessions can be closed and deleted, and loaded / resumed, listed
and forked as far as the agent port says it can (`PortInfo.can_*`: a bridged agent may not),
plus additional directories when workspaces are mounted; MCP servers over stdio, streamable
HTTP and SSE. `agentCapabilities._meta.steerable` (`STEERABLE_META`) names this agent's
extensions: the `_steerable/steer` and `_steerable/follow_up` methods (when the port can
steer) and the opt-in event channel. Auth methods are the two the stable schema has
(`auth_methods`): an `agent` method, `authenticate` with which re-reads the stored
credentials, and, when the client can run a login in its terminal, a `terminal` method that
runs `steerable-bridge login`. Neither is required for a route that needs no key.
`session_features(params)` reads the v1.25 client capabilities `session.notices` /
`session.compaction` from the raw `initialize` params, because the SDK 0.12.1 models drop
keys they do not know. Imports
nothing heavy: it must stay cheap to load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION
from acp import schema as acp

from steerable_bridge import __version__
from steerable_bridge.runtime.ports.model import ModelInfo

if TYPE_CHECKING:  # the port (and the runtime behind it) is not loaded before `initialize`
    from steerable_bridge.runtime.ports.port import PortInfo

__all__ = [
    "CREDENTIALS_METHOD",
    "LOGIN_METHOD",
    "STEERABLE_META",
    "auth_methods",
    "initialize_response",
    "session_features",
    "terminal_auth_supported",
]


def session_features(params: object) -> tuple[bool, bool]:
    """(notices, compaction): whether the raw `initialize` params advertise
    `clientCapabilities.session.notices` / `.compaction` (an object; omitted or null: no)."""
    caps = params.get("clientCapabilities") if isinstance(params, dict) else None
    session = caps.get("session") if isinstance(caps, dict) else None
    if not isinstance(session, dict):
        return False, False
    return isinstance(session.get("notices"), dict), isinstance(session.get("compaction"), dict)


CREDENTIALS_METHOD = "stored-credentials"
"""The `agent` auth method: `authenticate` re-reads the stored credentials and the route."""
LOGIN_METHOD = "login"
"""The `terminal` auth method: the client runs `steerable-bridge login` in a terminal."""

STEERABLE_META: dict[str, Any] = {
    "steer": {
        "method": "_steerable/steer",
        "params": {"sessionId": "string", "text": "string"},
        "result": {"taken": "boolean", "reason": "string | null"},
        "description": "add a message to the running turn at its next step boundary",
    },
    "follow_up": {
        "method": "_steerable/follow_up",
        "params": {"sessionId": "string", "text": "string"},
        "result": {"taken": "boolean", "reason": "string | null"},
        "description": "queue a message the running turn takes when it would otherwise end",
    },
    "events": {
        "opt_in": "initialize with _meta: {steerable: {events: true}}",
        "notification": "_steerable/event",
        "description": "every LoopEvent of every session, in order",
    },
}
"""What `agentCapabilities._meta.steerable` advertises (see docs/mapping.md)."""


def terminal_auth_supported(caps: acp.ClientCapabilities | None) -> bool:
    """True when the client can run a terminal login: `auth.terminal` (the schema) or
    `_meta["terminal-auth"]` (what the registry's checker and older clients send)."""
    if caps is None:
        return False
    if caps.auth is not None and caps.auth.terminal:
        return True
    return bool((caps.field_meta or {}).get("terminal-auth") is True)


def auth_methods(model: str, *, terminal: bool) -> list[Any]:
    """The advertised auth methods; `terminal` only when the client supports it."""
    methods: list[Any] = [
        acp.AuthMethodAgent(
            id=CREDENTIALS_METHOD,
            name="Use saved credentials",
            description=(
                f"Re-reads the key `steerable-bridge login` saved (or the environment's) for"
                f" {model}; models that need no key (demo, a local server) need no sign-in"
            ),
        )
    ]
    if terminal:
        methods.append(
            acp.TerminalAuthMethod(
                type="terminal",
                id=LOGIN_METHOD,
                name="Log in to a model provider",
                description=(
                    "Runs `steerable-bridge login`: pick OpenAI-compatible or Anthropic, a"
                    " base URL and a key; it is saved 0600 in your config directory"
                ),
                args=["login"],
            )
        )
    return methods


def initialize_response(
    info: ModelInfo | None,
    model: str,
    *,
    workspaces: bool,
    client: acp.ClientCapabilities | None = None,
    port: PortInfo | None = None,
) -> acp.InitializeResponse:
    """The answer to `initialize` for the default model's `info` (None when unresolvable),
    the `client`'s capabilities and what the agent `port` can do (None: everything, as our
    runtime and the AG-UI bridge can — the lazy front answers before any port exists)."""
    methods = auth_methods(model, terminal=terminal_auth_supported(client))
    can_load = port is None or port.can_load
    can_fork = port is None or port.can_fork
    can_list = port is None or port.can_list
    steerable = STEERABLE_META
    if port is not None and not port.can_steer:
        steerable = {k: v for k, v in STEERABLE_META.items() if k not in ("steer", "follow_up")}
    return acp.InitializeResponse(
        protocol_version=PROTOCOL_VERSION,
        agent_info=acp.Implementation(
            name="steerable-bridge", title="steerable-bridge", version=__version__
        ),
        agent_capabilities=acp.AgentCapabilities(
            load_session=can_load,
            prompt_capabilities=acp.PromptCapabilities(
                image=bool(info and info.accepts_images), audio=False, embedded_context=True
            ),
            session_capabilities=acp.SessionCapabilities(
                list=acp.SessionListCapabilities() if can_list else None,
                resume=acp.SessionResumeCapabilities() if can_load else None,
                close=acp.SessionCloseCapabilities(),
                delete=acp.SessionDeleteCapabilities(),
                fork=acp.SessionForkCapabilities() if can_fork else None,
                additional_directories=(
                    acp.SessionAdditionalDirectoriesCapabilities() if workspaces else None
                ),
            ),
            mcp_capabilities=acp.McpCapabilities(http=True, sse=True),  # and stdio, always
            field_meta={"steerable": steerable},
        ),
        auth_methods=methods,
    )
