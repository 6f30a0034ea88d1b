"""Bridge mode, ACP side: any ACP agent (a child process) behind our own agent port.

`AcpBridge` is a turn engine (`runtime.turns.turn.TurnEngine`) for `Agent(engine=...)`: each of
our turns becomes prompts of the child agent, recorded as LoopEvents. `BridgedAgentRoute`
is the model route (`acp-agent:<name>`) such an agent's sessions carry. See `engine.py`.
"""

from steerable_bridge.transports.acp.bridge.engine import SESSION_OPTION, AcpBridge
from steerable_bridge.transports.acp.bridge.route import ROUTE_PROVIDER, BridgedAgentRoute

__all__ = ["ROUTE_PROVIDER", "SESSION_OPTION", "AcpBridge", "BridgedAgentRoute"]
