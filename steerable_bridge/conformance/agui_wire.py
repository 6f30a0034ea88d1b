"""A session's LoopEvents as the AG-UI server streams them, without a server.

`render_agui_stream(events)` renders a log run by run the way `steerable-bridge serve` does —
one `AguiRenderer` per run (threadId = the session, runId = the run), the thread's
MESSAGES_SNAPSHOT before each run's end (`history.thread_messages`), each model request by
reference to the session's previous one (one `RequestChain` per session, across its runs)
— and returns the AG-UI
events as JSON objects, exactly as `model_dump_json(by_alias=True)` puts them on the wire.
Session-level events between runs travel in the next run's stream (an AG-UI stream starts
with RUN_STARTED); those after the last run have no stream to go in and are left out.
`renderer` lets a test substitute a deliberately broken renderer. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.agui.history import thread_messages
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.requests import RequestChain

__all__ = ["AguiRendering", "RendererFactory", "render_agui_stream"]


class AguiRendering(Protocol):
    """What the stream builder needs of a renderer (`AguiRenderer` has it)."""

    def render(self, event: LoopEvent) -> Sequence[BaseModel]: ...


RendererFactory = Callable[..., AguiRendering]
"""Called like `AguiRenderer(thread_id=..., run_id=..., messages=..., requests=...)`."""


def render_agui_stream(
    events: Sequence[LoopEvent], *, renderer: RendererFactory = AguiRenderer
) -> list[dict[str, Any]]:
    """The AG-UI events of every run in `events`, as wire JSON objects, in order."""
    out: list[dict[str, Any]] = []
    held: list[LoopEvent] = []
    seen: list[LoopEvent] = []
    current: AguiRendering | None = None
    chains: dict[str, RequestChain] = {}
    for event in events:
        seen.append(event)
        if isinstance(event, ev.RunStarted):
            sid = event.session_id
            current = renderer(
                thread_id=sid,
                run_id=event.run_id,
                messages=lambda sid=sid: thread_messages(sid, tuple(seen)),
                requests=chains.setdefault(sid, RequestChain()),
            )
            batch, held = [*held, event], []
        elif current is None:
            held.append(event)
            continue
        else:
            batch = [event]
        for item in batch:
            for model in current.render(item):
                out.append(json.loads(model.model_dump_json(by_alias=True)))
        if isinstance(event, ev.RunFinished | ev.RunFailed):
            current = None
    return out
