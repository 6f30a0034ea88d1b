"""SSE bytes for one run: `EventEncoder` over `AguiRenderer`, with a fast path for hot kinds.

`SseEncoder(renderer).encode(event)` returns the bytes `ag_ui.encoder.EventEncoder` gives
for every AG-UI event `renderer.render(event)` returns, joined. Building and dumping SDK
models is slow (`bench/agui_throughput.py` prints both paths); the kinds a run is mostly
made of (text, reasoning and tool-argument deltas, text and tool-call starts, text
ends, step starts and ends, and every CUSTOM kind) are instead written from byte templates
in the exact field order and escaping the SDK uses (`json.encoder.encode_basestring`
escapes as pydantic does; a CUSTOM value is `codec.event_to_json`, pydantic's own bytes, and
a `model_request`'s the renderer's `request_value`, by reference to the thread's previous
request).
`tests/transports/agui/test_wire.py` proves the bytes identical for every kind. Anything
else, and every event while the run is not open, goes through the SDK models — but a
MESSAGES_SNAPSHOT given its messages' JSON as its thread keeps it (`messages_json`: each
message dumped by the SDK once, joined) has it put inside the SDK's dump of the event
without its messages. Should an
event still hold text UTF-8 cannot encode (text is repaired where it enters, so this is a
bug elsewhere), it is sent with U+FFFD in its place and an error is logged, never dropped.
Every frame rendered from a log event carries an SSE `id:` naming its place in the thread's
log (`event_ids`: the event's seq, with a sub-index when it renders to several AG-UI events),
so a client resumes exactly where it stopped; frames the server makes up itself carry none.
No I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from json.encoder import encode_basestring
from typing import Any

from ag_ui.core import BaseEvent, Message, MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder
from pydantic_core import PydanticSerializationError

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.encoding.surrogates import scrub_json
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.transports.agui.mapping import NATIVE
from steerable_bridge.transports.agui.renderer import AguiRenderer

__all__ = ["SseEncoder", "event_ids"]

log = logging.getLogger("steerable_bridge.agui")

_esc: Callable[[str], str] = encode_basestring


def _text_start(event: ev.TextStart, rid: str) -> bytes | None:
    return (
        f'id: {event.seq}\ndata: {{"type":"TEXT_MESSAGE_START","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"text_start","seq":{event.seq},"run_id":{rid}}}}},'
        f'"messageId":{_esc(event.message_id)},"role":"assistant"}}\n\n'
    ).encode()


def _text_delta(event: ev.TextDelta, rid: str) -> bytes | None:
    if not event.delta:
        return None
    return (
        f'id: {event.seq}\ndata: {{"type":"TEXT_MESSAGE_CONTENT","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"text_delta","seq":{event.seq},"run_id":{rid}}}}},'
        f'"messageId":{_esc(event.message_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _text_end(event: ev.TextEnd, rid: str) -> bytes | None:
    return (
        f'id: {event.seq}\ndata: {{"type":"TEXT_MESSAGE_END","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"text_end","seq":{event.seq},"run_id":{rid}}}}},'
        f'"messageId":{_esc(event.message_id)}}}\n\n'
    ).encode()


def _reasoning_delta(event: ev.ReasoningDelta, rid: str) -> bytes | None:
    if not event.delta:
        return None
    return (
        f'id: {event.seq}\ndata: {{"type":"REASONING_MESSAGE_CONTENT","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"reasoning_delta","seq":{event.seq},"run_id":{rid}}}}},'
        f'"messageId":{_esc(event.message_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _tool_call_start(event: ev.ToolCallStart, rid: str) -> bytes | None:
    return (
        f'id: {event.seq}\ndata: {{"type":"TOOL_CALL_START","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"tool_call_start","seq":{event.seq},"run_id":{rid}}}}},'
        f'"toolCallId":{_esc(event.call_id)},"toolCallName":{_esc(event.name)},'
        f'"parentMessageId":{_esc(event.parent_message_id)}}}\n\n'
    ).encode()


def _tool_call_delta(event: ev.ToolCallDelta, rid: str) -> bytes | None:
    if not event.delta:
        return None
    return (
        f'id: {event.seq}\ndata: {{"type":"TOOL_CALL_ARGS","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"tool_call_delta","seq":{event.seq},"run_id":{rid}}}}},'
        f'"toolCallId":{_esc(event.call_id)},"delta":{_esc(event.delta)}}}\n\n'
    ).encode()


def _step_started(event: ev.StepStarted, rid: str) -> bytes | None:
    return (
        f'id: {event.seq}\ndata: {{"type":"STEP_STARTED","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"step_started","seq":{event.seq},"run_id":{rid},'
        f'"step":{event.step}}}}},"stepName":"step-{event.step}"}}\n\n'
    ).encode()


def _step_finished(event: ev.StepFinished, rid: str) -> bytes | None:
    u = event.usage
    return (
        f'id: {event.seq}\ndata: {{"type":"STEP_FINISHED","timestamp":{event.ts},'
        f'"metadata":{{"steerable":{{"kind":"step_finished","seq":{event.seq},"run_id":{rid},'
        f'"step":{event.step},"finish_reason":"{event.finish_reason}","usage":{{'
        f'"prompt_tokens":{u.prompt_tokens},"completion_tokens":{u.completion_tokens},'
        f'"cached_tokens":{u.cached_tokens},"reasoning_tokens":{u.reasoning_tokens},'
        f'"cache_creation_tokens":{u.cache_creation_tokens}}}}}}},'
        f'"stepName":"step-{event.step}"}}\n\n'
    ).encode()


def _tool_started(event: ev.ToolStarted, rid: str) -> bytes | None:
    sandbox = "null" if event.sandbox is None else f'"{event.sandbox}"'
    return (
        f'id: {event.seq}\ndata: {{"type":"CUSTOM","timestamp":{event.ts},'
        f'"name":"steerable.tool_started",'
        f'"value":{{"session_id":{_esc(event.session_id)},"run_id":{rid},"seq":{event.seq},'
        f'"ts":{event.ts},"kind":"tool_started","call_id":{_esc(event.call_id)},'
        f'"sandbox":{sandbox}}}}}\n\n'
    ).encode()


def _custom(event: LoopEvent, rid: str) -> bytes | None:
    if not _MIN_TS <= event.ts <= _MAX_TS:
        return None  # the SDK model refuses it; let the renderer decide
    return (
        f'id: {event.seq}\ndata: {{"type":"CUSTOM","timestamp":{event.ts},'
        f'"name":"steerable.{event.kind}",'
        f'"value":{codec.event_to_json(event)}}}\n\n'
    ).encode()


_MAX_TS = 9007199254740991
_MIN_TS = -_MAX_TS

_FAST: dict[type[ev.EventBase], Callable[[Any, str], bytes | None]] = {
    **{cls: _custom for cls in ev.EVENT_TYPES if cls not in NATIVE},
    ev.TextStart: _text_start,
    ev.TextDelta: _text_delta,
    ev.TextEnd: _text_end,
    ev.ReasoningDelta: _reasoning_delta,
    ev.ToolCallStart: _tool_call_start,
    ev.ToolCallDelta: _tool_call_delta,
    ev.StepStarted: _step_started,
    ev.StepFinished: _step_finished,
    ev.ToolStarted: _tool_started,
}


class SseEncoder:
    """Encodes one run's LoopEvents as SSE bytes (see the module docstring). `messages_json`,
    when given, is the messages' `model_dump_json(by_alias=True)` joined by commas, in UTF-8
    pieces, as their thread keeps it (`MessageFold.snapshot_json`): a MESSAGES_SNAPSHOT then
    holds those bytes, not the whole thread dumped again."""

    def __init__(
        self,
        renderer: AguiRenderer,
        *,
        messages_json: Callable[[list[Message]], Sequence[bytes]] | None = None,
    ) -> None:
        self.renderer = renderer
        self._encoder = EventEncoder()
        self._messages_json = messages_json
        self._run_id = ""
        self._rid = _esc("")
        self._fast: dict[type[ev.EventBase], Callable[[Any, str], bytes | None]] = {
            **_FAST,
            ev.ModelRequestEvent: self._model_request,
        }

    def _model_request(self, event: ev.ModelRequestEvent, rid: str) -> bytes | None:
        if not _MIN_TS <= event.ts <= _MAX_TS:
            return None  # the SDK model refuses it; let the renderer decide
        return (
            f'id: {event.seq}\ndata: {{"type":"CUSTOM","timestamp":{event.ts},'
            f'"name":"steerable.model_request",'
            f'"value":{self.renderer.request_value(event)}}}\n\n'
        ).encode()

    def encode(self, event: LoopEvent) -> bytes:
        renderer = self.renderer
        if renderer.started and not renderer.finished:
            fast = self._fast.get(type(event))
            if fast is not None:
                if event.run_id != self._run_id:
                    self._run_id, self._rid = event.run_id, _esc(event.run_id)
                try:
                    data = fast(event, self._rid)
                except (UnicodeError, PydanticSerializationError):
                    _repairing(event.kind)
                    data = fast(codec.repaired(event), self._rid)
                if data is not None:
                    return data
        return self.encode_models(renderer.render(event), seq=event.seq)

    def encode_models(self, models: Iterable[BaseEvent], *, seq: int | None = None) -> bytes:
        """EventEncoder's bytes for AG-UI events: rendered from the log event `seq` (each
        frame then carries its `event_ids` id), or built by the caller itself (no ids)."""
        models = list(models)
        try:
            frames = [self._frame(model) for model in models]
        except (UnicodeError, PydanticSerializationError):
            _repairing(", ".join(model.type for model in models))
            frames = [[self._encoder.encode(_repaired(model)).encode()] for model in models]
        parts: list[bytes] = []
        if seq is None:
            for frame in frames:
                parts += frame
        else:
            for i, frame in zip(event_ids(seq, len(frames)), frames, strict=True):
                parts.append(f"id: {i}\n".encode())
                parts += frame
        return b"".join(parts)  # one copy of a long snapshot, however many pieces it is

    def _frame(self, model: BaseEvent) -> list[bytes]:
        messages_json = self._messages_json
        if messages_json is None or type(model) is not MessagesSnapshotEvent:
            return [self._encoder.encode(model).encode()]
        # The snapshot's own fields dumped with no messages, the messages' JSON put in their
        # place: the bytes the SDK gives for the whole event (nested models dump alike).
        empty = self._encoder.encode(model.model_copy(update={"messages": []}))
        at = empty.find(_NO_MESSAGES)
        if at < 0:
            return [self._encoder.encode(model).encode()]
        at += len(_NO_MESSAGES) - 1
        return [empty[:at].encode(), *messages_json(model.messages), empty[at:].encode()]


_NO_MESSAGES = '"messages":[]'


def event_ids(seq: int, count: int) -> list[str]:
    """The SSE ids of the `count` AG-UI events rendered from log event `seq`: `seq.0`,
    `seq.1`, ... and `seq` for the last (so a plain seq means "all of that event")."""
    return [*(f"{seq}.{i}" for i in range(count - 1)), str(seq)] if count else []


def _repairing(what: str) -> None:
    log.error(
        "an AG-UI event (%s) held text UTF-8 cannot encode (a lone UTF-16 surrogate); sent"
        " with U+FFFD in its place — a bug in what produced the text",
        what,
    )


def _repaired(model: BaseEvent) -> BaseEvent:
    """`model` with every string made encodable (the last line; text is repaired where it
    enters, `runtime/encoding/surrogates.py`)."""
    return type(model).model_validate(scrub_json(model.model_dump(mode="json")))
