"""SSE bytes for one run: `EventEncoder` over `AguiRenderer`, with a fast path for hot kinds.

`SseEncoder(renderer).encode(event)` returns the bytes `ag_ui.encoder.EventEncoder` gives
for every AG-UI event `renderer.render(event)` returns, joined. Building and dumping an SDK
model costs about 5 µs, which caps a stream near 200,000 events/s; the streaming kinds a
run is made of (text, reasoning and tool-argument deltas, text and tool-call starts, text
ends, step starts) are instead written from byte templates in the exact field order and
escaping the SDK uses — `json.encoder.encode_basestring` escapes as pydantic does, and
`tests/transports/agui/test_wire.py` proves the bytes identical for every kind. Anything
else, and every event while the run is not open, goes through the SDK models. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from json.encoder import encode_basestring

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.agui.renderer import AguiRenderer

__all__ = ["SseEncoder"]

_esc: Callable[[str], str] = encode_basestring


def _head(agui_type: str, event: LoopEvent, extra: str = "") -> str:
    return (
        f'data: {{"type":"{agui_type}","timestamp":{event.ts},"metadata":{{"steerable":'
        f'{{"kind":"{event.kind}","seq":{event.seq},"run_id":{_esc(event.run_id)}{extra}}}}}'
    )


def _text_start(event: ev.TextStart) -> bytes | None:
    return (
        _head("TEXT_MESSAGE_START", event)
        + f',"messageId":{_esc(event.message_id)},"role":"assistant"}}\n\n'
    ).encode()


def _text_delta(event: ev.TextDelta) -> bytes | None:
    if not event.delta:
        return None
    return (
        _head("TEXT_MESSAGE_CONTENT", event)
        + f',"messageId":{_esc(event.message_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _text_end(event: ev.TextEnd) -> bytes | None:
    return (
        _head("TEXT_MESSAGE_END", event) + f',"messageId":{_esc(event.message_id)}}}\n\n'
    ).encode()


def _reasoning_delta(event: ev.ReasoningDelta) -> bytes | None:
    if not event.delta:
        return None
    return (
        _head("REASONING_MESSAGE_CONTENT", event)
        + f',"messageId":{_esc(event.message_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _tool_call_start(event: ev.ToolCallStart) -> bytes | None:
    return (
        _head("TOOL_CALL_START", event)
        + f',"toolCallId":{_esc(event.call_id)},"toolCallName":{_esc(event.name)},'
        f'"parentMessageId":{_esc(event.parent_message_id)}}}\n\n'
    ).encode()


def _tool_call_delta(event: ev.ToolCallDelta) -> bytes | None:
    if not event.delta:
        return None
    return (
        _head("TOOL_CALL_ARGS", event)
        + f',"toolCallId":{_esc(event.call_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _step_started(event: ev.StepStarted) -> bytes | None:
    return (
        _head("STEP_STARTED", event, f',"step":{event.step}')
        + f',"stepName":"step-{event.step}"}}\n\n'
    ).encode()


_FAST: dict[type[ev.EventBase], Callable[[ev.EventBase], bytes | None]] = {
    ev.TextStart: _text_start,  # type: ignore[dict-item]
    ev.TextDelta: _text_delta,  # type: ignore[dict-item]
    ev.TextEnd: _text_end,  # type: ignore[dict-item]
    ev.ReasoningDelta: _reasoning_delta,  # type: ignore[dict-item]
    ev.ToolCallStart: _tool_call_start,  # type: ignore[dict-item]
    ev.ToolCallDelta: _tool_call_delta,  # type: ignore[dict-item]
    ev.StepStarted: _step_started,  # type: ignore[dict-item]
}


class SseEncoder:
    """Encodes one run's LoopEvents as SSE bytes (see the module docstring)."""

    def __init__(self, renderer: AguiRenderer) -> None:
        self.renderer = renderer
        self._encoder = EventEncoder()

    def encode(self, event: LoopEvent) -> bytes:
        renderer = self.renderer
        if renderer.started and not renderer.finished:
            fast = _FAST.get(type(event))
            if fast is not None:
                data = fast(event)
                if data is not None:
                    return data
        return self.encode_models(renderer.render(event))

    def encode_models(self, models: Iterable[BaseEvent]) -> bytes:
        """EventEncoder's bytes for AG-UI events the caller built itself."""
        return "".join(self._encoder.encode(model) for model in models).encode()
