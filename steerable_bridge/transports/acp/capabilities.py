"""What the agent answers to `initialize`: version, identity, capabilities, auth methods.

One function, `initialize_response(info, model, workspaces=...)`, shared by the lazy front
(`front.py`, which answers before the runtime is loaded) and `AcpAgent`. Capabilities are
honest: `loadSession`; prompts take text, resource links and embedded resources, and images
only when the default model reads them; sessions can be listed, resumed, closed, deleted and
forked (plus additional directories when workspaces are mounted); MCP servers over stdio
only. When the default model needs an API key that is missing, an `env_var` auth method
names the variable. Imports nothing heavy: it must stay cheap to load.
"""

from __future__ import annotations

from typing import Any

from acp import PROTOCOL_VERSION
from acp import schema as acp

from steerable_bridge import __version__
from steerable_bridge.runtime.model import ModelInfo

__all__ = ["initialize_response"]


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
        ),
        auth_methods=auth_methods,
    )
