"""The model route of a bridged agent: `acp-agent:<name>`, never streamed from.

Sessions resolve their model route before each turn (`Session.prompt`), and the route names
what serves them in `run_started`, `/health` and `sessions show`. A bridged conversation is
served by the child ACP agent, so its route's provider only describes it (`info`); its
`stream` raises a clear `ProviderError`, since the bridge's turn engine never calls it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelStreamItem,
    ProviderError,
)

__all__ = ["ROUTE_PROVIDER", "BridgedAgentRoute"]

ROUTE_PROVIDER = "acp-agent"


class BridgedAgentRoute:
    """The provider of route `acp-agent:<name>` (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._info = ModelInfo(route=f"{ROUTE_PROVIDER}:{name}", accepts_images=True)

    @property
    def info(self) -> ModelInfo:
        return self._info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        raise ProviderError(
            "bridged_agent",
            f"{self._info.route} is an ACP agent the bridge runs; it takes prompts through"
            " the bridge's turn engine, not model requests — run it with"
            " `steerable-bridge serve --acp-agent`",
        )
        yield  # pragma: no cover - makes this an async generator
