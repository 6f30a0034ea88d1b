"""A session's LoopEvents as the ACP agent puts them on the wire, without a process.

`render_acp_transcript(events)` builds the transcript `steerable-bridge acp` produces for a
log — the client's `session/prompt` for each run, the `_steerable/event` notification (when
`channel`) and the `session/update`s the transport's own `AcpRenderer` makes for each event,
`session/request_permission` and the client's answer, `elicitation/create` for a question
and the client's answer to it, `elicitation/complete` for a completed url question, then
the prompt's response (stop
reason via the transport's `stop_reason`) or its JSON-RPC error (`errors.run_failed`) — as
JSON objects, the way they cross the wire. Property tests feed it generated logs and check
the transcript (`check_acp_transcript`) and its decoding (`decode_acp`); `renderer` lets a
test substitute a deliberately broken renderer (and `stop` a broken stop-reason mapping). A
cancelled run gets the client's `session/cancel` before its response. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from acp import schema as s
from pydantic import BaseModel

from steerable_bridge.conformance.acp_rules import EVENT_METHOD
from steerable_bridge.conformance.transcript import WireMessage
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent, StopReason
from steerable_bridge.runtime.values import ContentPart
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.questions import elicitation_id
from steerable_bridge.transports.acp.renderer import AcpRenderer, content_block, stop_reason

__all__ = ["AcpRendering", "render_acp_transcript"]


class AcpRendering(Protocol):
    """What the transcript builder needs of a renderer (`AcpRenderer` has it)."""

    def render(self, event: LoopEvent) -> Sequence[BaseModel]: ...


def _dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _prompt_blocks(content: Sequence[ContentPart]) -> list[Any]:
    return [_dump(content_block(part)) for part in content]


def _question(event: ev.QuestionAsked) -> dict[str, Any]:
    """`elicitation/create` params for a question, as `transports/acp/questions.py` sends them."""
    params: dict[str, Any] = {
        "_meta": {"steerable": {"event": codec.event_to_jsonable(event)}},
        "sessionId": event.session_id,
        "mode": event.mode,
        "message": event.message,
    }
    if event.call_id is not None:
        params["toolCallId"] = event.call_id
    if event.schema_json is not None:
        params["requestedSchema"] = json.loads(event.schema_json)
    if event.url is not None:
        params["elicitationId"] = elicitation_id(event.session_id, event.question_id)
        params["url"] = event.url
    return params


def _answer(event: ev.QuestionAnswered) -> dict[str, Any]:
    """The client's result for `elicitation/create`: the action, and the content if any."""
    result: dict[str, Any] = {"action": event.action}
    if event.content_json is not None:
        result["content"] = json.loads(event.content_json)
    return result


def _wire(sender: str, message: dict[str, Any]) -> WireMessage:
    """One JSON-RPC message as the client or the agent sent it."""
    return WireMessage(
        sender="client" if sender == "client" else "agent",
        message={"jsonrpc": "2.0", **message},
    )


def _permission_request(event: ev.PermissionRequested) -> dict[str, Any]:
    """The params of the agent's `session/request_permission` for `event`."""
    return {
        "_meta": {"steerable": {"event": codec.event_to_jsonable(event)}},
        "sessionId": event.session_id,
        "toolCall": {"toolCallId": event.call_id, "title": event.tool_name},
        "options": [
            {"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in event.options
        ],
    }


def _prompt_response(
    event: ev.RunFinished, stop_reason: str, trace_id: str | None
) -> s.PromptResponse:
    """The agent's answer to `session/prompt` for a run that finished."""
    return s.PromptResponse(
        stop_reason=stop_reason,
        usage=s.Usage(
            total_tokens=event.usage.total_tokens,
            input_tokens=event.usage.prompt_tokens,
            output_tokens=event.usage.completion_tokens,
            thought_tokens=event.usage.reasoning_tokens or None,
            cached_read_tokens=event.usage.cached_tokens or None,
        ),
        field_meta={
            "steerable": {
                "run_id": event.run_id,
                "stop_reason": event.stop_reason,
                "event": codec.event_to_jsonable(event),
                **({"trace_id": trace_id} if trace_id else {}),
            }
        },
    )


def render_acp_transcript(
    events: Sequence[LoopEvent],
    *,
    channel: bool = False,
    renderer: Callable[[], AcpRendering] = AcpRenderer,
    stop: Callable[[StopReason], str] = stop_reason,
) -> list[WireMessage]:
    """The ACP transcript of one session's events (see the module docstring)."""
    out: list[WireMessage] = []
    draw = renderer()
    next_id = {"client": 10, "agent": 0}
    prompt_id: int | None = None
    trace_id: str | None = None
    permission: dict[str, int] = {}
    asked: dict[str, int] = {}

    def send(sender: str, message: dict[str, Any]) -> None:
        out.append(_wire(sender, message))

    def request(sender: str, method: str, params: Any) -> int:
        request_id = next_id[sender]
        next_id[sender] += 1
        send(sender, {"id": request_id, "method": method, "params": params})
        return request_id

    for event in events:
        sid = event.session_id
        if isinstance(event, ev.RunStarted):
            trace_id = event.trace_id
            prompt: dict[str, Any] = {"sessionId": sid, "prompt": []}
            prompt_id = request("client", "session/prompt", prompt)
        elif isinstance(event, ev.UserMessage) and prompt_id is not None and not prompt["prompt"]:
            prompt["prompt"] = _prompt_blocks(event.content)
        if isinstance(event, ev.PermissionResolved):
            answer = (
                {"outcome": "cancelled"}
                if event.outcome == "cancelled" or event.option_id is None
                else {"outcome": "selected", "optionId": event.option_id}
            )
            send("client", {"id": permission.pop(event.call_id), "result": {"outcome": answer}})
        if isinstance(event, ev.QuestionAnswered) and event.question_id in asked:
            send("client", {"id": asked.pop(event.question_id), "result": _answer(event)})
        if channel:
            send("agent", {"method": EVENT_METHOD, "params": codec.event_to_jsonable(event)})
        out += [
            _wire(
                "agent",
                {"method": "session/update", "params": {"sessionId": sid, "update": _dump(u)}},
            )
            for u in draw.render(event)
        ]
        if isinstance(event, ev.PermissionRequested):
            params = _permission_request(event)
            permission[event.call_id] = request("agent", "session/request_permission", params)
        elif isinstance(event, ev.QuestionAsked):
            asked[event.question_id] = request("agent", "elicitation/create", _question(event))
        elif isinstance(event, ev.QuestionCompleted):
            params = {
                "_meta": {"steerable": {"event": codec.event_to_jsonable(event)}},
                "elicitationId": elicitation_id(event.session_id, event.question_id),
            }
            send("agent", {"method": "elicitation/complete", "params": params})
        elif isinstance(event, ev.RunFinished) and prompt_id is not None:
            if event.stop_reason == "cancelled":
                send("client", {"method": "session/cancel", "params": {"sessionId": sid}})
            response = _prompt_response(event, stop(event.stop_reason), trace_id)
            send("agent", {"id": prompt_id, "result": _dump(response)})
            prompt_id = None
        elif isinstance(event, ev.RunFailed) and prompt_id is not None:
            error = errors.run_failed(
                event.code,
                event.message,
                event.run_id,
                codec.event_to_jsonable(event),
                trace_id=trace_id,
            )
            send("agent", {"id": prompt_id, "error": error.to_error_obj()})
            prompt_id = None
    return out
