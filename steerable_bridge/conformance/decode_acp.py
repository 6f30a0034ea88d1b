"""ACP transcript → LoopEvents: the inverse of the ACP rendering.

`decode_acp(transcript)` rebuilds the session's LoopEvents from what crossed the wire. With
the opt-in event channel (`_steerable/event` notifications) it returns those events, which
are exact for every kind. Without it, it decodes the editor-facing messages: each
`session/update` carries `_meta.steerable` (kind, seq, ts, run id, and what the ACP payload
cannot hold), so every kind the mapping table marks ACP-exact comes back field for field;
the prompt's response (→ `run_finished`) and its error (→ `run_failed`) carry the whole
closing event, and `session/request_permission` the `permission_requested` event, which come
back exactly; what the client itself says (`session/prompt` → `run_started` and
`user_message`, its answer to a permission request → `permission_resolved`) comes back with
its meaning only (`seq` -1, `ts` 0). Likewise `elicitation/create` carries the whole
`question_asked` event, and the client's answer to it is `question_answered` by meaning;
`elicitation/complete` carries the whole `question_completed` event (without it: the
elicitation id, and the call of the question that id names).
The v1.25 updates (`notice`, `compaction_update`, `compaction_summary_chunk`) are read with
the generated `schema/stable.py` models: a notice comes back from its own fields, a
compaction from its completed `compaction_update`, a streamed compaction's start and drop
from their `compaction_update`s (in_progress; cancelled / failed) and each piece of its
summary from its `compaction_summary_chunk`.
`session/load` replays each message's consecutive deltas as one chunk whose `_meta.steerable`
has `last_seq` (`runtime/session_log/replay.py`): it decodes to one delta (first seq and ts,
the text joined) standing for seqs `seq`..`last_seq`, which is what `coalesce_deltas` makes of the
live deltas; the `_steerable/event` channel replays every event exactly.
`session/load` replays events the transcript already holds; an event whose (session, seq)
was decoded before is dropped unless `dedupe=False`. Raises `DecodeError` naming the message
when something cannot be decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from acp import schema as s
from pydantic import ValidationError

from steerable_bridge.conformance.acp_rules import EVENT_METHOD, V125_UPDATES
from steerable_bridge.conformance.transcript import as_transcript
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import (
    Command,
    ContentPart,
    DiffContent,
    ImagePart,
    Location,
    PermissionOption,
    PlanEntry,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolContent,
    ToolError,
    Usage,
    canonical_json,
)
from steerable_bridge.transports.acp.questions import elicitation_id

__all__ = [
    "DecodeError",
    "content_part",
    "decode_acp",
    "has_event_channel",
    "session_update",
    "tool_part",
]

_STOP_BACK = {"max_turn_requests": "max_steps"}


class DecodeError(CodedError, ValueError):
    """A wire message that the decoder cannot turn back into LoopEvents (a `ValueError`
    too, as callers have always caught it)."""

    code = "undecodable"

    def __init__(self, message: str) -> None:
        super().__init__("undecodable", message)


def has_event_channel(messages: Iterable[object]) -> bool:
    """True when the transcript holds `_steerable/event` notifications."""
    return any(m.message.get("method") == EVENT_METHOD for m in as_transcript(messages))


def _steerable(meta: object) -> dict[str, Any]:
    if isinstance(meta, Mapping) and isinstance(meta.get("steerable"), Mapping):
        return dict(meta["steerable"])
    return {}


def content_part(block: Any) -> ContentPart:
    """An ACP content block (SDK model) as a message content part."""
    extra = _steerable(getattr(block, "field_meta", None))
    if isinstance(block, s.TextContentBlock):
        return TextPart(text=block.text)
    if isinstance(block, s.ImageContentBlock):
        return ImagePart(data=block.data, mime_type=block.mime_type, uri=block.uri)
    if isinstance(block, s.EmbeddedResourceContentBlock) and isinstance(
        block.resource, s.TextResourceContents
    ):
        r = block.resource
        return ResourcePart(uri=r.uri, text=r.text, mime_type=r.mime_type, name=extra.get("name"))
    if isinstance(block, s.ResourceContentBlock):
        name = extra.get("name", block.name)
        return ResourcePart(uri=block.uri, mime_type=block.mime_type, name=name)
    raise DecodeError(f"content block {type(block).__name__} has no content part counterpart")


def tool_part(content: Any) -> ToolContent:
    """ACP tool call content (SDK model) as a tool content part."""
    if isinstance(content, s.FileEditToolCallContent):
        return DiffContent(path=content.path, old_text=content.old_text, new_text=content.new_text)
    if isinstance(content, s.TerminalToolCallContent):
        return TerminalContent(terminal_id=content.terminal_id)
    return content_part(content.content)


@dataclass(slots=True)
class _Decoder:
    dedupe: bool
    out: list[LoopEvent] = field(default_factory=list)
    seen: set[tuple[str, int]] = field(default_factory=set)
    user_parts: dict[tuple[str, str], list[ContentPart]] = field(default_factory=dict)
    prompts: dict[object, tuple[str, int, int]] = field(default_factory=dict)
    """Open session/prompt id → (session, index of its run_started, index of user_message)."""
    permissions: dict[object, tuple[str, str, dict[str, Any]]] = field(default_factory=dict)
    questions: dict[object, tuple[str, str, str | None]] = field(default_factory=dict)
    """Open elicitation/create id → (session, question id, call id)."""

    def add(self, event: LoopEvent) -> None:
        if event.seq >= 0:
            key = (event.session_id, event.seq)
            if self.dedupe and key in self.seen:
                return
            self.seen.add(key)
        self.out.append(event)

    # -- editor-facing messages -------------------------------------------------------------

    def update(self, session_id: str, update: Any) -> None:
        meta = _steerable(update.field_meta)
        if not meta:
            raise DecodeError(
                f"session/update {update.session_update} has no _meta.steerable; it was not"
                " rendered by steerable-bridge's ACP renderer"
            )
        kind = meta["kind"]
        base: dict[str, Any] = {
            "session_id": session_id,
            "run_id": meta["run_id"],
            "seq": meta["seq"],
            "ts": meta["ts"],
        }
        event = self._event(kind, base, meta, update)
        if event is not None:
            self.add(event)
            if "last_seq" in meta:  # a replayed chunk folding the deltas seq..last_seq
                self.seen.update((session_id, n) for n in range(base["seq"], meta["last_seq"] + 1))

    def _event(
        self, kind: str, base: dict[str, Any], meta: dict[str, Any], u: Any
    ) -> LoopEvent | None:
        if kind == "text_delta":
            return ev.TextDelta(**base, message_id=u.message_id, delta=u.content.text)
        if kind == "notice":
            if u.session_update == "notice":  # the v1.25 update carries it
                severity, title, description = u.severity.root, u.title, u.description
            else:  # the agent message a client without `session.notices` gets
                severity, title, description = meta["severity"], meta["title"], meta["description"]
            return ev.Notice(**base, severity=severity, title=title, description=description)
        if kind == "compaction_started":
            return ev.CompactionStarted(
                **base, compaction_id=u.compaction_id.root, trigger=meta["trigger"]
            )
        if kind == "compaction_summary_delta":
            return ev.CompactionSummaryDelta(
                **base, compaction_id=u.compaction_id.root, delta=u.content.root.text
            )
        if kind == "compaction_dropped":
            return ev.CompactionDropped(
                **base,
                compaction_id=u.compaction_id.root,
                reason=meta["reason"],
                detail=meta["detail"],
            )
        if kind == "compaction":  # the text is only its headline; the event is in _meta
            if "part" in meta:  # v1.25: the opening update and the summary chunk
                return None
            fields = {k: v for k, v in meta.items() if k not in ("kind", "seq", "ts", "run_id")}
            return codec.event_from_jsonable({**base, "kind": kind, **fields})
        if kind == "reasoning_delta":
            return ev.ReasoningDelta(**base, message_id=u.message_id, delta=u.content.text)
        if kind in ("user_message", "steer_applied", "follow_up_applied"):
            key = (base["session_id"], meta["message_id"])
            parts = self.user_parts.setdefault(key, [])
            parts.append(content_part(u.content))
            if meta["part"] < meta["parts"] - 1:
                return None
            del self.user_parts[key]
            cls = {
                "user_message": ev.UserMessage,
                "steer_applied": ev.SteerApplied,
                "follow_up_applied": ev.FollowUpApplied,
            }[kind]
            return cls(**base, message_id=meta["message_id"], content=tuple(parts))  # type: ignore[no-any-return]
        return self._session_event(kind, base, meta, u)

    def _session_event(
        self, kind: str, base: dict[str, Any], meta: dict[str, Any], u: Any
    ) -> LoopEvent:
        """`_event` for the tool, plan, usage and session-state kinds."""
        if kind == "tool_call_end":
            return ev.ToolCallEnd(
                **base,
                call_id=u.tool_call_id,
                name=meta["name"],
                arguments_json=meta["arguments_json"],
                tool_kind=u.kind or "other",
                title=meta.get("title", u.title),
                locations=tuple(Location(path=x.path, line=x.line) for x in u.locations or ()),
                executor=meta["executor"],
            )
        if kind == "tool_started":
            return ev.ToolStarted(**base, call_id=u.tool_call_id, sandbox=meta.get("sandbox"))
        if kind == "tool_output":
            content = [tool_part(c) for c in u.content or ()]
            count = meta["parts"]
            return ev.ToolOutput(
                **base, call_id=u.tool_call_id, content=tuple(content[len(content) - count :])
            )
        if kind == "tool_finished":
            content = [tool_part(c) for c in u.content or ()]
            error = meta.get("error")
            return ev.ToolFinished(
                **base,
                call_id=u.tool_call_id,
                status=meta["status"],
                content=tuple(content[: meta["parts"]]),
                raw_output_json=meta.get("raw_output_json"),
                error=ToolError(code=error["code"], message=error["message"]) if error else None,
            )
        if kind == "plan_updated":
            return ev.PlanUpdated(
                **base,
                entries=tuple(
                    PlanEntry(content=e.content, priority=e.priority, status=e.status)
                    for e in u.entries
                ),
            )
        if kind == "usage_updated":
            return ev.UsageUpdated(
                **base,
                used=u.used,
                size=meta.get("size"),
                cache_read_tokens=meta.get("cache_read_tokens", 0),
                cache_creation_tokens=meta.get("cache_creation_tokens", 0),
            )
        if kind == "session_info":
            return ev.SessionInfo(**base, title=meta.get("title"))
        if kind == "mode_changed":
            return ev.ModeChanged(**base, mode_id=u.current_mode_id)
        if kind == "config_changed":
            return ev.ConfigChanged(**base, option_id=meta["option_id"], value=meta["value"])
        if kind == "commands_updated":
            return ev.CommandsUpdated(
                **base,
                commands=tuple(
                    Command(
                        name=c.name,
                        description=c.description,
                        input_hint=c.input.root.hint if c.input is not None else None,
                    )
                    for c in u.available_commands
                ),
            )
        raise DecodeError(f"no decoding for kind {kind!r} in a session/update")

    # -- requests and responses (meaning only) ----------------------------------------------

    def prompt(self, request_id: object, params: Mapping[str, Any]) -> None:
        request = s.PromptRequest.model_validate(params)
        sid = request.session_id
        meaning: dict[str, Any] = {"session_id": sid, "run_id": "", "seq": -1, "ts": 0}
        self.out.append(ev.RunStarted(**meaning, model=""))
        started = len(self.out) - 1
        parts = tuple(content_part(block) for block in request.prompt)
        self.out.append(ev.UserMessage(**meaning, message_id="", content=parts))
        self.prompts[request_id] = (sid, started, len(self.out) - 1)

    def prompt_answer(self, request_id: object, message: Mapping[str, Any]) -> None:
        sid, started, user = self.prompts.pop(request_id)
        trace_id = _trace_id(message)
        carried = _carried_end(message)
        if carried is not None:
            run_id = carried.run_id
            self.add(carried)
        elif "error" in message:
            data = message["error"].get("data") or {}
            run_id = str(data.get("runId", ""))
            code = str(data.get("code", message["error"].get("code")))
            self.out.append(
                ev.RunFailed(session_id=sid, run_id=run_id, seq=-1, ts=0, code=code,
                             message=str(message["error"].get("message", "")))
            )  # fmt: skip
        else:
            response = s.PromptResponse.model_validate(message["result"])
            meta = _steerable(response.field_meta)
            run_id = str(meta.get("run_id", ""))
            stop: Any = meta.get("stop_reason") or _STOP_BACK.get(
                response.stop_reason, response.stop_reason
            )
            usage = Usage()
            if response.usage is not None:
                usage = Usage(
                    prompt_tokens=response.usage.input_tokens,
                    completion_tokens=response.usage.output_tokens,
                    cached_tokens=response.usage.cached_read_tokens or 0,
                    reasoning_tokens=response.usage.thought_tokens or 0,
                    cache_creation_tokens=response.usage.cached_write_tokens or 0,
                )
            self.out.append(
                ev.RunFinished(session_id=sid, run_id=run_id, seq=-1, ts=0, stop_reason=stop,
                               usage=usage)
            )  # fmt: skip
        for index in (started, user):
            old = self.out[index]
            self.out[index] = type(old)(**{**_fields(old), "run_id": run_id})
        opened = self.out[started]
        if trace_id is not None and isinstance(opened, ev.RunStarted):
            self.out[started] = replace(opened, trace_id=trace_id)

    def permission(self, request_id: object, params: Mapping[str, Any]) -> None:
        request = s.RequestPermissionRequest.model_validate(params)
        options = tuple(
            PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind)
            for o in request.options
        )
        call_id = request.tool_call.tool_call_id
        carried = _steerable(request.field_meta).get("event")
        if carried is not None:
            self.add(codec.event_from_jsonable(carried))
        else:
            run_id = self._current_run(request.session_id)
            self.out.append(
                ev.PermissionRequested(session_id=request.session_id, run_id=run_id, seq=-1,
                                       ts=0, call_id=call_id, tool_name="", options=options)
            )  # fmt: skip
        kinds: dict[str, Any] = {o.option_id: o.kind for o in options}
        self.permissions[request_id] = (request.session_id, call_id, kinds)

    def permission_answer(self, request_id: object, message: Mapping[str, Any]) -> None:
        sid, call_id, kinds = self.permissions.pop(request_id)
        outcome: Any = "cancelled"
        option_id = None
        if "result" in message:
            answer = s.RequestPermissionResponse.model_validate(message["result"]).outcome
            if isinstance(answer, s.AllowedOutcome):
                option_id = answer.option_id
                outcome = kinds.get(option_id, "reject_once")
        self.out.append(
            ev.PermissionResolved(session_id=sid, run_id=self._current_run(sid), seq=-1, ts=0,
                                  call_id=call_id, tool_name="", outcome=outcome,
                                  option_id=option_id)
        )  # fmt: skip

    def question(self, request_id: object, params: Mapping[str, Any]) -> None:
        carried = _steerable(params.get("_meta")).get("event")
        sid = str(params.get("sessionId", ""))
        if carried is not None:
            asked = codec.event_from_jsonable(carried)
            if not isinstance(asked, ev.QuestionAsked):
                raise DecodeError(f"elicitation/create carries a {asked.kind} event")
            self.add(asked)
        else:
            schema = params.get("requestedSchema")
            asked = ev.QuestionAsked(
                session_id=sid, run_id=self._current_run(sid), seq=-1, ts=0,
                question_id=str(params.get("elicitationId", "")).removeprefix(f"{sid}/"),
                message=str(params["message"]), mode=params["mode"],
                schema_json=canonical_json(schema) if schema is not None else None,
                url=params.get("url"), call_id=params.get("toolCallId"),
            )  # fmt: skip
            self.out.append(asked)
        self.questions[request_id] = (asked.session_id, asked.question_id, asked.call_id)

    def completed(self, params: Mapping[str, Any]) -> None:
        request = s.CompleteElicitationNotification.model_validate(params)
        carried = _steerable(request.field_meta).get("event")
        if carried is not None:
            done = codec.event_from_jsonable(carried)
            if not isinstance(done, ev.QuestionCompleted):
                raise DecodeError(f"elicitation/complete carries a {done.kind} event")
            self.add(done)
            return
        asked = next(
            (e for e in reversed(self.out) if isinstance(e, ev.QuestionAsked)
             and elicitation_id(e.session_id, e.question_id) == request.elicitation_id),
            None,
        )  # fmt: skip
        sid = asked.session_id if asked is not None else ""
        self.out.append(
            ev.QuestionCompleted(session_id=sid, run_id=self._current_run(sid), seq=-1, ts=0,
                                 question_id=asked.question_id if asked is not None
                                 else request.elicitation_id,
                                 call_id=asked.call_id if asked is not None else None)
        )  # fmt: skip

    def question_answer(self, request_id: object, message: Mapping[str, Any]) -> None:
        sid, question_id, call_id = self.questions.pop(request_id)
        result = message.get("result")
        action: Any = result.get("action") if isinstance(result, Mapping) else "cancel"
        content = result.get("content") if isinstance(result, Mapping) else None
        if action not in ("accept", "decline", "cancel"):
            action = "cancel"  # an unknown action is never taken for a known one
        self.out.append(
            ev.QuestionAnswered(session_id=sid, run_id=self._current_run(sid), seq=-1, ts=0,
                                question_id=question_id, action=action, call_id=call_id,
                                content_json=canonical_json(content)
                                if action == "accept" and content is not None else None)
        )  # fmt: skip

    def _current_run(self, session_id: str) -> str:
        for event in reversed(self.out):
            if event.session_id == session_id and event.run_id:
                return event.run_id
        return ""


def _carried_end(message: Mapping[str, Any]) -> LoopEvent | None:
    """The run's closing event when the agent sent it (`_meta.steerable.event` / `data.event`)."""
    if "error" in message:
        data = message["error"].get("data")
        carried = data.get("event") if isinstance(data, Mapping) else None
    else:
        result = message.get("result")
        meta = _steerable(result.get("_meta")) if isinstance(result, Mapping) else {}
        carried = meta.get("event")
    return codec.event_from_jsonable(carried) if carried is not None else None


def _trace_id(message: Mapping[str, Any]) -> str | None:
    """The run's trace id when the agent sent one (`_meta.steerable.trace_id` / `data.traceId`)."""
    if "error" in message:
        data = message["error"].get("data")
        found = data.get("traceId") if isinstance(data, Mapping) else None
    else:
        result = message.get("result")
        found = (_steerable(result.get("_meta")) if isinstance(result, Mapping) else {}).get(
            "trace_id"
        )
    return found if isinstance(found, str) else None


def session_update(params: object) -> tuple[str, Any]:
    """A `session/update`'s session id and update model: the SDK's, or for a v1.25 kind the
    generated `schema/stable.py` model (loaded only then)."""
    update = params.get("update") if isinstance(params, dict) else None
    if isinstance(update, dict) and update.get("sessionUpdate") in V125_UPDATES:
        from steerable_bridge.transports.acp.schema import stable

        v125 = stable.SessionNotification.model_validate(params)
        return v125.session_id.root, v125.update.root
    note = s.SessionNotification.model_validate(params)
    return note.session_id, note.update


def _fields(event: LoopEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


def decode_acp(
    messages: Iterable[object], *, channel: bool | None = None, dedupe: bool = True
) -> list[LoopEvent]:
    """The LoopEvents a transcript carries (see the module docstring).

    `channel=None` uses the `_steerable/event` channel when the transcript has it; True
    insists on it, False decodes the editor-facing messages even when it is there.
    """
    transcript = as_transcript(messages)
    use_channel = has_event_channel(transcript) if channel is None else channel
    decoder = _Decoder(dedupe=dedupe)
    asked: dict[tuple[str, object], str] = {}
    for index, entry in enumerate(transcript):
        message = entry.message
        method = message.get("method")
        try:
            if use_channel:
                if method == EVENT_METHOD and entry.sender == "agent":
                    decoder.add(codec.event_from_jsonable(message.get("params")))
                continue
            if isinstance(method, str) and "id" in message:
                asked[(entry.sender, message["id"])] = method
                if method == "session/prompt" and entry.sender == "client":
                    decoder.prompt(message["id"], message.get("params") or {})
                elif method == "session/request_permission" and entry.sender == "agent":
                    decoder.permission(message["id"], message.get("params") or {})
                elif method == "elicitation/create" and entry.sender == "agent":
                    decoder.question(message["id"], message.get("params") or {})
            elif method == "session/update" and entry.sender == "agent":
                session_id, update = session_update(message.get("params"))
                decoder.update(session_id, update)
            elif method == "elicitation/complete" and entry.sender == "agent":
                decoder.completed(message.get("params") or {})
            elif method is None and "id" in message:
                other = "agent" if entry.sender == "client" else "client"
                answered = asked.pop((other, message["id"]), None)
                if answered == "session/prompt":
                    decoder.prompt_answer(message["id"], message)
                elif answered == "session/request_permission":
                    decoder.permission_answer(message["id"], message)
                elif answered == "elicitation/create":
                    decoder.question_answer(message["id"], message)
        except (DecodeError, ValidationError, KeyError, TypeError) as err:
            raise DecodeError(f"message {index} ({method or 'response'}): {err}") from err
    return decoder.out
