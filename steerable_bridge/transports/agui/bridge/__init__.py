"""The AG-UI client side: any AG-UI endpoint served as an agent of ours (bridge mode).

`acp --agui-url URL` composes these pieces: an `AguiEndpoint` (the URL, headers and one
pooled HTTP client; also the model route the bridged sessions name) and an `AguiEngine`,
the turn engine a runtime `Agent` runs each turn with, so the ACP transport serves the
endpoint to an editor exactly as it serves our own runtime. `endpoint.py` speaks HTTP and
SSE, `request.py` builds each RunAgentInput from the session log, `mapping.py` turns the
server's events into LoopEvents (keeping the values of `calls.py`), `interrupts.py`
answers its interrupts through the session's permission policy, `plan.py` reads plans out
of state, and `engine.py` runs the turn. Imports the `ag_ui` SDK; never the ACP one.
"""

from steerable_bridge.transports.agui.bridge.endpoint import (
    AguiEndpoint,
    BridgeError,
    EndpointSettings,
    parse_header,
)
from steerable_bridge.transports.agui.bridge.engine import AguiEngine

__all__ = ["AguiEndpoint", "AguiEngine", "BridgeError", "EndpointSettings", "parse_header"]
