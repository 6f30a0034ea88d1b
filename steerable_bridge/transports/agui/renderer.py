"""The AG-UI renderer: one run's LoopEvents in, AG-UI 1.0 events (SDK models) out, losslessly.

`AguiRenderer(thread_id=..., run_id=...)` is made per AG-UI run (one runtime turn) and
`render(event)` returns the AG-UI events for one LoopEvent. It is pure apart from its own
bookkeeping: no I/O, no clock, no ids of its own. The server (`stream.py`) encodes what it
returns. Every LoopEvent is carried by exactly one AG-UI event, so a decoder rebuilds the
exact LoopEvent sequence. This module holds the run's bracket (start, end, snapshot, held
and dropped events) and the thread's plan; the content between is built by the `native.py`
functions the table in `mapping.py` names (which AG-UI events carry which kind; also
`docs/mapping.md`). Every event's `timestamp` is its `ts` in ms, and the LoopEvent fields a
native event lacks ride in `metadata.steerable`. Events that carry no LoopEvent
(MESSAGES_SNAPSHOT before every RUN_FINISHED / RUN_ERROR unless the `messages` source says
the client holds the thread, the second half of the reasoning pairs, the server's own short
streams) have `metadata.steerable` = `{"derived": true}`. A LoopEvent whose native form is
impossible (an empty delta, a patch the SDK rejects) goes as CUSTOM instead, and so does
`run_started` after `open`. With `legacy_outcomes=True` (a client that did not declare AG-UI
1.0) a cancelled run has no `outcome` and a success outcome no `pendingToolCallIds`. A
`model_request` is sent by reference to the thread's previous request (`requests.py`; the
`requests` chain is the thread's, so it knows the requests of earlier runs), whole with
`full_requests=True` or when it is the thread's first. Nothing
is rendered after the run ends (counted in `dropped`); events before `run_started` are held
and sent right after it, so sort decoded events by `seq` to get log order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, get_args

from ag_ui.core import (
    PROTOCOL_VERSION,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    Message,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TokenUsage,
)

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import Usage
from steerable_bridge.transports.agui import native
from steerable_bridge.transports.agui.mapping import NATIVE, TABLE
from steerable_bridge.transports.agui.native import DERIVED, custom, fields_of, meta
from steerable_bridge.transports.agui.requests import RequestChain

__all__ = ["AguiRenderer", "plan_message_id"]

MessagesSource = Callable[[], Sequence[Message] | None]
"""The thread's messages for a run's MESSAGES_SNAPSHOT; None: the client holds them all
already (no snapshot is sent)."""


_MESSAGE_TYPES: frozenset[type] = frozenset(get_args(get_args(Message)[0]))
"""The SDK's message models (`Message` is their union, discriminated by role)."""


def plan_message_id(thread_id: str) -> str:
    """The AG-UI activity message id of a thread's plan."""
    return f"plan-{thread_id}"


def _token_usage(usage: Usage) -> list[TokenUsage] | None:
    if min(usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens) < 0:
        return None  # not countable in AG-UI's terms; the exact figures ride in metadata
    if min(usage.cached_tokens, usage.cache_creation_tokens) < 0:
        return None
    return [
        TokenUsage(
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cached_input_tokens=usage.cached_tokens,
            cache_write_input_tokens=usage.cache_creation_tokens,
        )
    ]


class AguiRenderer:
    """Renders one AG-UI run. `messages` supplies the thread for MESSAGES_SNAPSHOT."""

    NATIVE: ClassVar[frozenset[type[ev.EventBase]]] = NATIVE
    """Kinds with a native AG-UI form (`mapping.TABLE`); every other kind is sent as CUSTOM."""

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        parent_run_id: str | None = None,
        messages: MessagesSource | None = None,
        legacy_outcomes: bool = False,
        requests: RequestChain | None = None,
        full_requests: bool = False,
    ) -> None:
        self.thread_id = thread_id
        self.requests = requests if requests is not None else RequestChain()
        """The thread's requests so far: the base each `model_request` refers to."""
        self.full_requests = full_requests
        self.legacy_outcomes = legacy_outcomes
        self.run_id = run_id
        self.parent_run_id = parent_run_id
        self._messages = messages
        self.started = False
        self.finished = False
        self.dropped = 0
        self._held: list[LoopEvent] = []
        own: dict[type[ev.EventBase], Callable[[Any], list[BaseEvent]]] = {
            ev.RunStarted: self._run_started,
            ev.RunFinished: self._run_finished,
            ev.RunFailed: self._run_failed,
            ev.PlanUpdated: self._plan_updated,
        }
        self._handlers: dict[type[ev.EventBase], Callable[[Any], list[BaseEvent]]] = {
            row.event: row.render or own[row.event] for row in TABLE
        }

    # -- the entry points -------------------------------------------------------------------

    def render(self, event: LoopEvent) -> list[BaseEvent]:
        """The AG-UI events for one LoopEvent (empty once the run has ended)."""
        if self.finished:
            self.dropped += 1
            return []
        if not self.started and not isinstance(event, ev.RunStarted):
            self._held.append(event)
            return []
        out = self._one(event)
        if isinstance(event, ev.RunStarted) and self._held:
            held, self._held = self._held, []
            for item in held:
                out.extend(self._one(item))
        return out

    def derived_run(self, name: str, value: Any) -> list[BaseEvent]:
        """A short run of the server's own: RUN_STARTED, CUSTOM `name`, RUN_FINISHED success."""
        self.started = self.finished = True
        return [
            self._run_started_event(metadata=DERIVED),
            CustomEvent(name=name, value=value, metadata=DERIVED),
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=RunFinishedSuccessOutcome(),
                metadata=DERIVED,
            ),
        ]

    def open(self) -> list[BaseEvent]:
        """A derived RUN_STARTED that opens the run before its `run_started` arrives (the
        transport sends it while it still reads the thread's history); that event then
        travels as CUSTOM `steerable.run_started`."""
        self.started = True
        return [self._run_started_event(metadata=DERIVED)]

    def derived_error(self, code: str, message: str) -> list[BaseEvent]:
        """RUN_ERROR for a failure outside the runtime (with RUN_STARTED if none was sent)."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        if not self.started:
            out.append(self._run_started_event(metadata=DERIVED))
        self.started = self.finished = True
        out.append(RunErrorEvent(message=message, code=code, metadata=DERIVED))
        return out

    def _one(self, event: LoopEvent) -> list[BaseEvent]:
        if isinstance(event, ev.ModelRequestEvent):  # CUSTOM, but by reference
            return self._model_request(event)
        handler = self._handlers.get(type(event))
        if handler is not None:
            try:
                return handler(event)
            except ValueError:  # pydantic's ValidationError too: no valid native form
                pass
        out: list[BaseEvent] = [custom(event)]
        if isinstance(event, ev.RunStarted):  # the run must still open and close natively
            self.started = True
            out.insert(0, self._run_started_event(metadata=DERIVED))
        elif isinstance(event, ev.RunFinished | ev.RunFailed):
            out = [*self._snapshot(), *out]
            out.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedSuccessOutcome(),
                    metadata=DERIVED,
                )
                if isinstance(event, ev.RunFinished)
                else RunErrorEvent(message=event.message, code=event.code, metadata=DERIVED)
            )
            self.finished = True
        return out

    custom = staticmethod(custom)
    """The CUSTOM form every kind can take: the whole event as its value."""

    def request_value(self, event: ev.ModelRequestEvent) -> str:
        """The JSON text of CUSTOM `steerable.model_request`'s value (`requests.py`)."""
        return self.requests.value_json(event, full=self.full_requests)

    def _model_request(self, event: ev.ModelRequestEvent) -> list[BaseEvent]:
        value = json.loads(self.request_value(event))
        return [CustomEvent(name=f"steerable.{event.kind}", value=value, timestamp=event.ts)]

    # -- run --------------------------------------------------------------------------------

    def _run_started_event(self, **extra: Any) -> RunStartedEvent:
        return RunStartedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            protocol_version=PROTOCOL_VERSION,
            parent_run_id=self.parent_run_id,
            **extra,
        )

    def _run_started(self, event: ev.RunStarted) -> list[BaseEvent]:
        if self.started:  # opened already (`open`): the event rides as CUSTOM
            return [custom(event)]
        self.started = True
        extra = {"model": event.model}
        if event.parent_run_id is not None:
            extra["parent_run_id"] = event.parent_run_id
        if event.trace_id is not None:
            extra["trace_id"] = event.trace_id
        if event.client_run_id is not None:
            extra["client_run_id"] = event.client_run_id
        return [self._run_started_event(timestamp=event.ts, metadata=meta(event, extra))]

    def _snapshot(self) -> list[BaseEvent]:
        messages = self._messages() if self._messages is not None else None
        if messages is None:
            return []
        if type(messages) is list and all(type(m) in _MESSAGE_TYPES for m in messages):
            # Each message is an SDK model validated when it was made: the event is
            # validated without them and holds them as they are (a long thread's snapshot
            # does not validate every message again on every run).
            empty = MessagesSnapshotEvent(messages=[], metadata=DERIVED)
            return [empty.model_copy(update={"messages": messages})]
        return [MessagesSnapshotEvent(messages=list(messages), metadata=DERIVED)]

    def _run_finished(self, event: ev.RunFinished) -> list[BaseEvent]:
        outcome: (
            RunFinishedSuccessOutcome
            | RunFinishedInterruptOutcome
            | RunFinishedCancelledOutcome
            | None
        )
        if event.stop_reason in ("cancelled", "rejected"):  # the user stopped the run
            outcome = None if self.legacy_outcomes else RunFinishedCancelledOutcome()
        elif event.interrupts:
            outcome = RunFinishedInterruptOutcome(
                interrupts=[native.interrupt(item) for item in event.interrupts]
            )
        else:
            pending = None if self.legacy_outcomes else list(event.pending_tool_call_ids)
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending or None)
        finished = RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=outcome,
            usage=_token_usage(event.usage),
            timestamp=event.ts,
            metadata=meta(
                event,
                fields_of(event, "stop_reason", "usage", "pending_tool_call_ids", "interrupts"),
            ),
        )
        out = [*self._snapshot(), finished]
        self.finished = True
        return out

    def _run_failed(self, event: ev.RunFailed) -> list[BaseEvent]:
        error = RunErrorEvent(
            message=event.message, code=event.code, timestamp=event.ts, metadata=meta(event)
        )
        out = [*self._snapshot(), error]
        self.finished = True
        return out

    # -- plan (thread-scoped) ---------------------------------------------------------------

    def _plan_updated(self, event: ev.PlanUpdated) -> list[BaseEvent]:
        entries = codec.event_to_jsonable(event)["entries"]
        return [
            ActivitySnapshotEvent(
                message_id=plan_message_id(self.thread_id),
                activity_type="plan",
                content={"entries": entries},
                replace=True,
                timestamp=event.ts,
                metadata=meta(event),
            )
        ]
