"""AG-UI events from any server → LoopEvents of the bridged turn, recorded through its `emit`.

`EventMapper` is made once per bridged turn (which may span several AG-UI runs: a run that
ends in an interrupt is resumed in the same turn) and `handle(event)` records what one
validated AG-UI event says, returning True when the run has ended:

    AG-UI event                          LoopEvents
    TEXT_MESSAGE_START / CONTENT / END   text_start / text_delta / text_end
    TEXT_MESSAGE_CHUNK                   the same, opened and closed implicitly
    REASONING_MESSAGE_START / CONTENT /  reasoning_start / reasoning_delta / reasoning_end
      END, REASONING_END, *_CHUNK        (THINKING_* arrive here as REASONING_*)
    TOOL_CALL_START / ARGS / END, CHUNK  tool_call_start / tool_call_delta / tool_call_end
    TOOL_CALL_RESULT                     tool_started (unless announced) + tool_finished
    STATE_SNAPSHOT / STATE_DELTA         state_snapshot / state_delta, + plan_updated when
                                         the state holds a plan (`plan.py`)
    ACTIVITY_SNAPSHOT of type plan       plan_updated
    CUSTOM on_interrupt (ag-ui-langgraph) the run ends in an interrupt (`Ending.legacy`)
    CUSTOM steerable.compaction* (ours)  compaction_started / _summary_delta / compaction /
                                         compaction_dropped (`compaction.py`)
    RUN_FINISHED                         usage summed; its outcome is kept (`ending`)
    RUN_ERROR                            kept as the failure (`ending`)
    RUN_STARTED, STEP_*, MESSAGES_SNAPSHOT, RAW, ACTIVITY_DELTA, SUBAGENT_*,
    REASONING_START / ENCRYPTED_VALUE,   nothing (debug log): the turn's own events bracket
    CUSTOM                               it and the bridge's log is the conversation

Servers are not all well behaved, so: content for a message or call that was never started
starts it; a chunk stream is closed by the next event of another kind; ids are the
server's, except one already used earlier in the conversation (servers that count from 1
each run), which gets a suffix for the rest of the turn, and a call without a parent
message is attached to the open text or a fresh id. When the server is our own
(`metadata.steerable` present), what its native events lack is taken from there: a tool
call's kind, title and locations, a result's status, content (diffs, terminals), raw
output and error, and the moment a tool started (CUSTOM `steerable.tool_started`) — so an
editor shows a bridged call exactly as a native one. `close_open()` ends whatever is still
open; `settle_calls(...)` gives every call still without a result its one `tool_finished`.
The values it keeps (calls, the run's ending) and the reading of our metadata are `calls.py`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
from ag_ui.core import (
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    EventType,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import JsonValue

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import ToolStatus
from steerable_bridge.runtime.turns.turn import Emit
from steerable_bridge.runtime.values import (
    Location,
    PlanEntry,
    TextPart,
    ToolContent,
    ToolError,
    ToolKind,
    Usage,
    canonical_json,
)
from steerable_bridge.transports.agui.bridge.calls import (
    LEGACY_INTERRUPT,
    BridgedCall,
    Ending,
    described,
    legacy_interrupt,
)
from steerable_bridge.transports.agui.bridge.compaction import NAMES as COMPACTION_NAMES
from steerable_bridge.transports.agui.bridge.compaction import FarCompactions
from steerable_bridge.transports.agui.bridge.plan import plan_from_activity, plan_from_state

__all__ = ["EventMapper"]

log = logging.getLogger(__name__)


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


class EventMapper:
    """Records one bridged turn's AG-UI events as LoopEvents (see the module docstring)."""

    def __init__(
        self,
        emit: Emit,
        new_id: Callable[[str], str],
        *,
        taken: set[str],
        state: Callable[[], JsonValue],
    ) -> None:
        self._emit = emit
        self._compactions = FarCompactions(emit)
        self._new_id = new_id
        self._taken = taken
        self._state = state
        self._ids: dict[str, str] = {}
        self.texts: set[str] = set()
        self.reasoning: set[str] = set()
        self.calls: dict[str, BridgedCall] = {}
        self._chunk: tuple[str, str] | None = None
        """(kind, id) of the message or call a *_CHUNK stream holds open."""
        self._last_text: str | None = None
        self._plan: tuple[PlanEntry, ...] | None = None
        self.usage = Usage()
        self.ending: Ending | None = None
        self._legacy: list[Any] = []
        """Values of the run's CUSTOM `on_interrupt` events (ag-ui-langgraph)."""
        self.handled = 0
        self.opened: dict[str, str | None] = {}
        """Url questions the editor accepted and waits on (question id → call id), until
        they are completed (`complete`)."""
        self._handlers: dict[EventType, Callable[[Any], Any]] = {
            EventType.TEXT_MESSAGE_START: self._text_start,
            EventType.TEXT_MESSAGE_CONTENT: self._text_content,
            EventType.TEXT_MESSAGE_END: self._text_end,
            EventType.TEXT_MESSAGE_CHUNK: self._text_chunk,
            EventType.REASONING_MESSAGE_START: self._reasoning_start,
            EventType.REASONING_MESSAGE_CONTENT: self._reasoning_content,
            EventType.REASONING_MESSAGE_END: self._reasoning_end,
            EventType.REASONING_MESSAGE_CHUNK: self._reasoning_chunk,
            EventType.REASONING_END: self._reasoning_done,
            EventType.TOOL_CALL_START: self._call_start,
            EventType.TOOL_CALL_ARGS: self._call_args,
            EventType.TOOL_CALL_END: self._call_end,
            EventType.TOOL_CALL_CHUNK: self._call_chunk,
            EventType.TOOL_CALL_RESULT: self._call_result,
            EventType.STATE_SNAPSHOT: self._state_snapshot,
            EventType.STATE_DELTA: self._state_delta,
            EventType.ACTIVITY_SNAPSHOT: self._activity,
            EventType.CUSTOM: self._custom,
            EventType.RUN_FINISHED: self._run_finished,
            EventType.RUN_ERROR: self._run_error,
        }
        self._chunk_kinds = {
            EventType.TEXT_MESSAGE_CHUNK,
            EventType.REASONING_MESSAGE_CHUNK,
            EventType.TOOL_CALL_CHUNK,
        }

    # -- the entry points -----------------------------------------------------------------------

    def begin_run(self) -> None:
        """A new AG-UI run of the turn starts (its ending is not known yet)."""
        self.ending = None
        self._legacy.clear()

    async def handle(self, event: BaseEvent) -> bool:
        """Record one event; True when it ended the run."""
        self.handled += 1
        kind = event.type
        if type(event) is TextMessageContentEvent and self._chunk is None:
            # the hot path (one per streamed token): `_text_content` of an open text, inline
            ours = self._ids.get(event.message_id, event.message_id)
            if ours in self.texts:
                if event.delta:
                    await self._emit(ev.TextDelta, message_id=ours, delta=event.delta)
                return self.ending is not None
        if self._chunk is not None and kind not in self._chunk_kinds:
            await self._close_chunk()
        handler = self._handlers.get(kind)
        if handler is None:
            log.debug("AG-UI %s carries nothing for the editor; skipped", kind.value)
            return False
        await handler(event)
        return self.ending is not None

    async def complete(self, question_id: object) -> None:
        """`question_completed` for an accepted url question (once; unknown ids: nothing)."""
        if isinstance(question_id, str) and question_id in self.opened:
            call_id = self.opened.pop(question_id)
            await self._emit(ev.QuestionCompleted, question_id=question_id, call_id=call_id)

    async def complete_all(self, still_asked: set[str]) -> None:
        """The resumed run ended: the url questions it did not ask again are over."""
        for question_id in [q for q in self.opened if q not in still_asked]:
            await self.complete(question_id)

    async def close_open(self) -> None:
        """End every open text, reasoning and unfinished call argument stream, and drop a
        far compaction still open."""
        await self._compactions.close()
        await self._close_chunk()
        for message_id in list(self.texts):
            await self._end_text(message_id)
        for message_id in list(self.reasoning):
            await self._end_reasoning(message_id)
        for call in list(self.calls.values()):
            if call.ended is None:
                await self._end_call(call, None)

    async def settle_calls(
        self, status: ToolStatus, code: str, message: Callable[[BridgedCall], str]
    ) -> None:
        """Give every ended call still without a result a `tool_finished` saying why."""
        for call in self.calls.values():
            if call.finished or call.ended is None:
                continue
            call.finished = True
            text = message(call)
            await self._emit(
                ev.ToolFinished,
                call_id=call.call_id,
                status=status,
                content=(TextPart(text=text),),
                error=ToolError(code=code, message=text),
            )

    def call(self, server_id: str | None) -> BridgedCall | None:
        """The turn's call the server names `server_id`."""
        if server_id is None:
            return None
        return self.calls.get(self._ids.get(server_id, server_id))

    def claim(self, server_id: str) -> str:
        """The id the turn uses for the server's `server_id` (suffixed if already taken)."""
        known = self._ids.get(server_id)
        if known is not None:
            return known
        ours = server_id
        n = 1
        while ours in self._taken:
            n += 1
            ours = f"{server_id}~{n}"
        self._taken.add(ours)
        self._ids[server_id] = ours
        return ours

    def _mapped(self, server_id: str) -> str:
        return self._ids.get(server_id, server_id)

    # -- text -----------------------------------------------------------------------------------

    async def _start_text(self, server_id: str) -> str:
        ours = self.claim(server_id)
        self.texts.add(ours)
        self._last_text = ours
        await self._emit(ev.TextStart, message_id=ours)
        return ours

    async def _end_text(self, ours: str) -> None:
        self.texts.discard(ours)
        await self._emit(ev.TextEnd, message_id=ours)

    async def _text_start(self, event: TextMessageStartEvent) -> None:
        if self._mapped(event.message_id) in self.texts:
            return
        self._ids.pop(event.message_id, None)  # a reused, closed id: a new message
        await self._start_text(event.message_id)

    async def _text_content(self, event: TextMessageContentEvent) -> None:
        ours = self._mapped(event.message_id)
        if ours not in self.texts:
            ours = await self._start_text(event.message_id)
        if event.delta:
            await self._emit(ev.TextDelta, message_id=ours, delta=event.delta)

    async def _text_end(self, event: TextMessageEndEvent) -> None:
        ours = self._mapped(event.message_id)
        if ours in self.texts:
            await self._end_text(ours)

    async def _text_chunk(self, event: TextMessageChunkEvent) -> None:
        ours = await self._chunk_open("text", event.message_id, None)
        if ours is not None and event.delta:
            await self._emit(ev.TextDelta, message_id=ours, delta=event.delta)

    # -- reasoning ------------------------------------------------------------------------------

    async def _start_reasoning(self, server_id: str) -> str:
        ours = self.claim(server_id)
        self.reasoning.add(ours)
        await self._emit(ev.ReasoningStart, message_id=ours)
        return ours

    async def _end_reasoning(self, ours: str) -> None:
        self.reasoning.discard(ours)
        await self._emit(ev.ReasoningEnd, message_id=ours)

    async def _reasoning_start(self, event: ReasoningMessageStartEvent) -> None:
        if self._mapped(event.message_id) not in self.reasoning:
            self._ids.pop(event.message_id, None)
            await self._start_reasoning(event.message_id)

    async def _reasoning_content(self, event: ReasoningMessageContentEvent) -> None:
        ours = self._mapped(event.message_id)
        if ours not in self.reasoning:
            ours = await self._start_reasoning(event.message_id)
        if event.delta:
            await self._emit(ev.ReasoningDelta, message_id=ours, delta=event.delta)

    async def _reasoning_end(self, event: ReasoningMessageEndEvent) -> None:
        ours = self._mapped(event.message_id)
        if ours in self.reasoning:
            await self._end_reasoning(ours)

    async def _reasoning_done(self, event: BaseEvent) -> None:
        for ours in list(self.reasoning):
            await self._end_reasoning(ours)

    async def _reasoning_chunk(self, event: ReasoningMessageChunkEvent) -> None:
        ours = await self._chunk_open("reasoning", event.message_id, None)
        if ours is not None and event.delta:
            await self._emit(ev.ReasoningDelta, message_id=ours, delta=event.delta)

    # -- chunks ---------------------------------------------------------------------------------

    async def _chunk_open(self, kind: str, server_id: str | None, name: str | None) -> str | None:
        """The id a chunk continues, opening a new message / call when it names a new one."""
        if self._chunk is not None and (
            self._chunk[0] != kind or (server_id is not None and self._chunk[1] != server_id)
        ):
            await self._close_chunk()
        if self._chunk is not None:
            return self._mapped(self._chunk[1])
        if kind == "call" and not name:
            log.debug("skipped a TOOL_CALL_CHUNK that continues no call")
            return None
        server_id = server_id or self._new_id("msg" if kind != "call" else "call")
        self._chunk = (kind, server_id)
        if kind == "text":
            return await self._start_text(server_id)
        if kind == "reasoning":
            return await self._start_reasoning(server_id)
        return (await self._start_call(server_id, name or "tool", None)).call_id

    async def _close_chunk(self) -> None:
        if self._chunk is None:
            return
        kind, server_id = self._chunk
        self._chunk = None
        ours = self._mapped(server_id)
        if kind == "text" and ours in self.texts:
            await self._end_text(ours)
        elif kind == "reasoning" and ours in self.reasoning:
            await self._end_reasoning(ours)
        elif kind == "call":
            call = self.calls.get(ours)
            if call is not None and call.ended is None:
                await self._end_call(call, None)

    # -- tool calls -----------------------------------------------------------------------------

    async def _start_call(self, server_id: str, name: str, parent: str | None) -> BridgedCall:
        ours = self.claim(server_id)
        call = self.calls[ours] = BridgedCall(call_id=ours, name=name)
        if parent is not None:
            parent = self._mapped(parent)
        else:
            parent = next(iter(self.texts), None) or self._last_text or self._new_id("msg")
        await self._emit(ev.ToolCallStart, call_id=ours, name=name, parent_message_id=parent)
        return call

    async def _end_call(self, call: BridgedCall, event: BaseEvent | None) -> None:
        arguments = "".join(call.args) or "{}"
        kind: ToolKind = "other"
        title = call.name
        locations: tuple[Location, ...] = ()
        ours = (
            None
            if event is None
            else described("tool_call_end", event, call_id=call.call_id, name=call.name)
        )
        if isinstance(ours, ev.ToolCallEnd):
            kind, title, locations = ours.tool_kind, ours.title, ours.locations
        call.ended = await self._emit(
            ev.ToolCallEnd,
            call_id=call.call_id,
            name=call.name,
            arguments_json=arguments,
            tool_kind=kind,
            title=title or call.name,
            locations=locations,
        )

    async def _call_start(self, event: ToolCallStartEvent) -> None:
        if self.call(event.tool_call_id) is not None:
            return
        await self._start_call(event.tool_call_id, event.tool_call_name, event.parent_message_id)

    async def _call_args(self, event: ToolCallArgsEvent) -> None:
        call = self.call(event.tool_call_id)
        if call is None or call.ended is not None:
            log.debug("skipped TOOL_CALL_ARGS for call %s, which is not open", event.tool_call_id)
            return
        if event.delta:
            call.args.append(event.delta)
            await self._emit(ev.ToolCallDelta, call_id=call.call_id, delta=event.delta)

    async def _call_end(self, event: ToolCallEndEvent) -> None:
        call = self.call(event.tool_call_id)
        if call is not None and call.ended is None:
            await self._end_call(call, event)

    async def _call_chunk(self, event: ToolCallChunkEvent) -> None:
        ours = await self._chunk_open("call", event.tool_call_id, event.tool_call_name)
        call = self.calls.get(ours) if ours is not None else None
        if call is not None and event.delta:
            call.args.append(event.delta)
            await self._emit(ev.ToolCallDelta, call_id=call.call_id, delta=event.delta)

    async def _call_result(self, event: ToolCallResultEvent) -> None:
        call = self.call(event.tool_call_id)
        if call is None:
            log.debug(
                "skipped a TOOL_CALL_RESULT for call %s, unknown to this turn", event.tool_call_id
            )
            return
        if call.finished:
            return
        if call.ended is None:
            await self._end_call(call, None)
        if not call.started:
            call.started = True
            await self._emit(ev.ToolStarted, call_id=call.call_id)
        text = _text(event.content)
        status: ToolStatus = "completed"
        content: tuple[ToolContent, ...] = (TextPart(text=text),) if text else ()
        raw: str | None = None
        error: ToolError | None = None
        result = described("tool_finished", event, call_id=call.call_id)
        if isinstance(result, ev.ToolFinished):
            status, content = result.status, result.content
            raw, error = result.raw_output_json, result.error
        call.finished = True
        await self._emit(
            ev.ToolFinished,
            call_id=call.call_id,
            status=status,
            content=content,
            raw_output_json=raw,
            error=error,
        )

    # -- state, plan, activity, custom ----------------------------------------------------------

    async def _state_snapshot(self, event: StateSnapshotEvent) -> None:
        try:
            state_json = canonical_json(event.snapshot)
        except (TypeError, ValueError):
            log.debug("skipped a STATE_SNAPSHOT that is not JSON")
            return
        await self._emit(ev.StateSnapshot, state_json=state_json)
        await self._plan_of(self._state())

    async def _state_delta(self, event: StateDeltaEvent) -> None:
        patch = event.model_dump(mode="json", by_alias=True)["delta"]
        try:  # a patch that does not apply must not reach the log (facts would fail on it)
            jsonpatch.apply_patch(self._state(), patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as err:
            log.warning("skipped a STATE_DELTA that does not apply to the state: %s", err)
            return
        await self._emit(ev.StateDelta, patch_json=canonical_json(patch))
        await self._plan_of(self._state())

    async def _plan_of(self, state: JsonValue) -> None:
        await self._set_plan(plan_from_state(state))

    async def _set_plan(self, entries: tuple[PlanEntry, ...] | None) -> None:
        if entries is None or entries == self._plan:
            return
        self._plan = entries
        await self._emit(ev.PlanUpdated, entries=entries)

    async def _activity(self, event: ActivitySnapshotEvent) -> None:
        await self._set_plan(plan_from_activity(event.activity_type, event.content))

    async def _custom(self, event: CustomEvent) -> None:
        if event.name == LEGACY_INTERRUPT:
            self._legacy.append(event.value)
            return
        if event.name in COMPACTION_NAMES:
            await self._compactions.handle(event.value)
            return
        if event.name == "steerable.tool_started" and isinstance(event.value, Mapping):
            call = self.call(event.value.get("call_id"))
            if call is not None and call.ended is not None and not call.started:
                call.started = True
                await self._emit(ev.ToolStarted, call_id=call.call_id)
            return
        if event.name == "steerable.question_completed" and isinstance(event.value, Mapping):
            await self.complete(event.value.get("question_id"))
            return
        if event.name == "steerable.usage_updated" and isinstance(event.value, Mapping):
            used, size = event.value.get("used"), event.value.get("size")
            if isinstance(used, int) and (size is None or isinstance(size, int)):
                await self._emit(ev.UsageUpdated, used=used, size=size)
            return
        log.debug("AG-UI CUSTOM %s is not one the bridge knows; skipped", event.name[:80])

    # -- the run's end --------------------------------------------------------------------------

    async def _run_finished(self, event: RunFinishedEvent) -> None:
        for usage in event.usage or ():
            self.usage = self.usage + Usage(
                prompt_tokens=usage.input_tokens or 0,
                completion_tokens=usage.output_tokens or 0,
                reasoning_tokens=usage.reasoning_tokens or 0,
                cached_tokens=usage.cached_input_tokens or 0,
                cache_creation_tokens=usage.cache_write_input_tokens or 0,
            )
        outcome = event.outcome
        kind = getattr(outcome, "type", "success")
        if kind == "interrupt":
            interrupts = tuple(getattr(outcome, "interrupts", ()) or ())
            self.ending = Ending(outcome="interrupt", interrupts=interrupts)
        elif kind == "cancelled":
            self.ending = Ending(outcome="cancelled")
        elif self._legacy:
            interrupts = tuple(legacy_interrupt(n, v) for n, v in enumerate(self._legacy, 1))
            self.ending = Ending(outcome="interrupt", interrupts=interrupts, legacy=True)
        else:
            pending = getattr(outcome, "pending_tool_call_ids", None) or ()
            self.ending = Ending(pending=tuple(self._mapped(i) for i in pending))

    async def _run_error(self, event: RunErrorEvent) -> None:
        self.ending = Ending(
            failed=True,
            code=event.code or "agui_run_error",
            message=event.message or "the AG-UI server reported an error without a message",
        )
