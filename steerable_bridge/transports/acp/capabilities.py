"""What the agent answers to `initialize`: version, identity, capabilities, auth methods.

One function, `initialize_response(info, model, workspaces=...)`, shared by the lazy front
(`front.py`, which answers before the runtime is loaded) and `AcpAgent`. Capabilities are
honest: `loadSession`; prompts take text, resource links and embedded resources, and images
only when the default model reads them; sessions can be listed, resumed, closed, deleted and
forked (plus additional directories when workspaces are mounted); MCP servers over stdio,
streamable HTTP and SSE. `agentCapabilities._meta.steerable` (`STEERABLE_META`) names this
agent's extensions: the `_steerable/steer` and `_steerable/follow_up` methods and the
opt-in event channel. When the default model needs an API key that is missing, an `env_var`
auth method names the variable. Imports nothing heavy: it must stay cheap to load.
"""

from __future__ import annotations

from typing import Any

from acp import PROTOCOL_VERSION
from acp import schema as acp

from steerable_bridge import __version__
from steerable_bridge.runtime.model import ModelInfo

__all__ = ["STEERABLE_META", "initialize_response"]

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


def initialize_response(
    info: ModelInfo | None, model: str, *, workspaces: bool
) -> acp.InitializeResponse:
    """The answer to `initialize` for the default model's `info` (None when unresolvable)."""
    missing = info.needs_api_key_env if info is not None else None
    auth_methods: list[Any] = []
    if missing:
        auth_methods.append(
            acp.EnvVarAuthMethod(
                type="env_var",
                id=f"env:{missing}",
                name=f"Set {missing}",
                description=f"The model {model} reads its key from {missing}",
                vars=[acp.AuthEnvVar(name=missing, label=missing)],
            )
        )
    return acp.InitializeResponse(
        protocol_version=PROTOCOL_VERSION,
        agent_info=acp.Implementation(
            name="steerable-bridge", title="steerable-bridge", version=__version__
        ),
        agent_capabilities=acp.AgentCapabilities(
            load_session=True,
            prompt_capabilities=acp.PromptCapabilities(
                image=bool(info and info.accepts_images), audio=False, embedded_context=True
            ),
            session_capabilities=acp.SessionCapabilities(
                list=acp.SessionListCapabilities(),
                resume=acp.SessionResumeCapabilities(),
                close=acp.SessionCloseCapabilities(),
                delete=acp.SessionDeleteCapabilities(),
                fork=acp.SessionForkCapabilities(),
                additional_directories=(
                    acp.SessionAdditionalDirectoriesCapabilities() if workspaces else None
                ),
            ),
            mcp_capabilities=acp.McpCapabilities(http=True, sse=True),  # and stdio, always
            field_meta={"steerable": STEERABLE_META},
        ),
        auth_methods=auth_methods,
    )
