"""The bridge in process, for tests of its mapping: a runtime `Agent` whose turn engine is
`AguiEngine`, over an `AguiEndpoint` whose HTTP client answers each run from a list of
replies (`httpx.MockTransport`), reached through the agent port (`LocalPort`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig, new_id
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings
from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
from steerable_bridge.runtime.ports.port import Attachments
from steerable_bridge.runtime.turns.turn import LoopSettings, RunOutcome, TurnInput
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.agui.bridge import AguiEndpoint, AguiEngine, EndpointSettings

Frame = BaseEvent | str
"""An SDK event, or a raw `data` string (an event the SDK does not know)."""

_ENCODER = EventEncoder()


def sse(frames: Sequence[Frame]) -> bytes:
    return "".join(
        f"data: {f}\n\n" if isinstance(f, str) else _ENCODER.encode(f) for f in frames
    ).encode()


@dataclass
class Bridged:
    """A bridged agent and what its endpoint received."""

    port: LocalPort
    inputs: list[dict[str, Any]] = field(default_factory=list)
    asked: list[PermissionRequest] = field(default_factory=list)

    async def turn(self, conversation_id: str, text: str) -> tuple[RunOutcome, list[LoopEvent]]:
        events: list[LoopEvent] = []

        async def sink(event: LoopEvent) -> None:
            events.append(event)

        turn = TurnInput(content=(TextPart(text=text),))
        outcome = await self.port.prompt(conversation_id, turn, sink)
        return outcome, events

    async def open(self, answer: str = "allow_once") -> str:
        async def asker(request: PermissionRequest) -> PermissionAnswer:
            self.asked.append(request)
            return PermissionAnswer(outcome=answer, option_id=answer)  # type: ignore[arg-type]

        async def attach(conversation_id: str) -> Attachments:
            return Attachments(asker=asker)

        conversation = await self.port.open("/tmp", attach=attach)
        return conversation.conversation_id


def bridged(
    replies: Sequence[Callable[[dict[str, Any]], httpx.Response] | Sequence[Frame]],
    **settings: Any,
) -> Bridged:
    """An agent bridging a mock endpoint that answers run N with `replies[N]`."""
    holder: list[Bridged] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        inputs = holder[0].inputs
        reply = replies[min(len(inputs), len(replies) - 1)]
        inputs.append(body)
        if callable(reply):
            return reply(body)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse(reply)
        )

    config = EndpointSettings(url="http://agui.test/agent", **settings)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    endpoint = AguiEndpoint(config, client=client)
    router = ModelRouter()
    router.register("agui", lambda name: endpoint)
    router.offer(config.route)
    agent = Agent(
        router=router,
        store=MemoryStore(),
        config=AgentConfig(
            model=config.route,
            quality=QualitySettings(mode="off"),
            loop=LoopSettings(new_id=new_id, permission_timeout_s=10),
        ),
        engine=AguiEngine(endpoint),
    )
    holder.append(Bridged(port=LocalPort(agent)))
    return holder[0]


def kinds(events: Sequence[LoopEvent]) -> list[str]:
    return [event.kind for event in events]
