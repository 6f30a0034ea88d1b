"""OpenAI Responses API wire format: request bodies out, stream events in.

`request_body(request, ...)` turns a `ModelRequest` into the JSON body of a streaming
`POST /responses` call: the system prompt as `instructions`, and the history as `input`
items — user and assistant messages (`input_text` / `input_image` / `output_text` parts),
each tool call as a `function_call` item and each result as a `function_call_output` —
built from the Chat Completions body of `openai_wire.request_body`, so both wires render a
history and its tools the same way. It asks `store: false` (the history is sent whole each
time; nothing is kept server-side). `EventDecoder` turns each decoded stream event into
our `ModelChunk`s: `response.output_text.delta` and `response.refusal.delta` as text,
`response.reasoning_summary_text.delta` / `response.reasoning_text.delta` as reasoning,
`response.output_item.added` of a `function_call` and its
`response.function_call_arguments.delta`s as a tool call (keyed by item id; arguments
that were not streamed are taken whole from the `.done` or `output_item.done` event), and
`response.completed` / `response.incomplete` as the end with its finish reason and usage;
`error` and `response.failed` raise `ResponsesFailure`. Lone UTF-16 surrogates are
repaired per channel (`runtime/encoding/surrogates.py`). Pure data mapping: no I/O, used only by
`openai_responses.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from steerable_bridge.adapters.llm.openai_wire import request_body as chat_body
from steerable_bridge.adapters.llm.openai_wire import usage_of
from steerable_bridge.runtime.encoding.surrogates import SurrogateJoiner, scrub
from steerable_bridge.runtime.errors import CodedError
from steerable_bridge.runtime.ports.model import (
    FinishReason,
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import Usage

__all__ = ["EventDecoder", "ResponsesFailure", "request_body", "to_input_items"]

INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
"""`incomplete_details.reason` of a `response.incomplete`, as our finish reasons."""


def request_body(request: ModelRequest, *, model: str, accepts_images: bool) -> dict[str, Any]:
    """The JSON body of one streaming Responses call, from the Chat Completions body."""
    chat = chat_body(request, model=model, accepts_images=accepts_images, include_usage=False)
    messages = chat.pop("messages")
    body: dict[str, Any] = {
        "model": model,
        "input": to_input_items(messages[1:] if request.system else messages),
        "stream": True,
        "store": False,
    }
    if request.system:
        body["instructions"] = request.system
    if "tools" in chat:  # {"type": "function", "function": {...}} → {"type": "function", ...}
        body["tools"] = [{"type": "function", **tool["function"]} for tool in chat["tools"]]
    if "max_tokens" in chat:
        body["max_output_tokens"] = chat["max_tokens"]
    if "temperature" in chat:
        body["temperature"] = chat["temperature"]
    return body


def to_input_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Responses `input` items, in order."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            output = {"call_id": message["tool_call_id"], "output": message["content"]}
            items.append({"type": "function_call_output", **output})
            continue
        content = message.get("content")
        if role == "assistant":
            if content:
                items.append(_message("assistant", [{"type": "output_text", "text": content}]))
            for call in message.get("tool_calls", ()):
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                    }
                )
            continue
        if isinstance(content, str):
            items.append(_message(role, [{"type": "input_text", "text": content}]))
        else:
            items.append(_message(role, [_input_part(part) for part in content or ()]))
    return items


def _message(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def _input_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "image_url":
        return {"type": "input_image", "image_url": part["image_url"]["url"]}
    return {"type": "input_text", "text": part["text"]}


class ResponsesFailure(CodedError):
    """The stream carried an `error` event or a `response.failed`: `code` is the server's
    error code, `message` its text (the provider turns both into a `ProviderError`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)
    streamed: bool = False


class EventDecoder:
    """The state of one streamed Responses answer (see the module docstring)."""

    def __init__(self) -> None:
        self.finish_reason: FinishReason | None = None
        self.model: str | None = None
        self.usage = Usage()
        self.stopped = False
        self._text = SurrogateJoiner()
        self._reasoning = SurrogateJoiner()
        self._calls: dict[str, _Call] = {}
        self._refused = False

    @property
    def replaced_surrogates(self) -> int:
        joiners = (self._text, self._reasoning, *(c.joiner for c in self._calls.values()))
        return sum(joiner.replaced for joiner in joiners)

    def feed(self, data: dict[str, Any]) -> list[ModelChunk]:
        """The chunks one decoded stream event yields (possibly none); `ValueError` for an
        event that lacks a field its type needs."""
        try:
            return self._feed(data)
        except KeyError as missing:
            raise ValueError(f"a {data.get('type')} event without {missing}") from None

    def _feed(self, data: dict[str, Any]) -> list[ModelChunk]:
        kind = data.get("type")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._refused = self._refused or kind == "response.refusal.delta"
            text = self._text.feed(str(data["delta"]))
            return [TextChunk(delta=text)] if text else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            text = self._reasoning.feed(str(data["delta"]))
            return [ReasoningChunk(delta=text)] if text else []
        if kind == "response.function_call_arguments.delta":
            call = self._calls[str(data["item_id"])]
            call.streamed = True
            arguments = call.joiner.feed(str(data["delta"]))
            return [ToolCallChunk(call_id=call.call_id, arguments_delta=arguments)]
        if kind == "response.function_call_arguments.done":
            return self._whole(self._calls[str(data["item_id"])], data["arguments"])
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = data["item"]
            if item.get("type") != "function_call":
                return []
            known = str(item["id"]) in self._calls
            out = [] if known else [self._added(item)]
            return out + self._whole(self._calls[str(item["id"])], item.get("arguments"))
        if kind == "response.created":
            self._named(data["response"])
        elif kind in ("response.completed", "response.incomplete"):
            self._ended(data["response"])
        elif kind == "response.failed":
            error = data["response"].get("error") or {}
            raise ResponsesFailure(str(error.get("code") or "failed"), _text(error))
        elif kind == "error":
            error = data["error"] if isinstance(data.get("error"), dict) else data
            raise ResponsesFailure(str(error.get("code") or "error"), _text(error))
        return []

    def flush(self) -> list[ModelChunk]:
        """What the joiners still hold: a surrogate whose pair never came, as U+FFFD."""
        out: list[ModelChunk] = []
        if text := self._text.flush():
            out.append(TextChunk(delta=text))
        if text := self._reasoning.flush():
            out.append(ReasoningChunk(delta=text))
        for call in self._calls.values():
            if text := call.joiner.flush():
                out.append(ToolCallChunk(call_id=call.call_id, arguments_delta=text))
        return out

    def _added(self, item: dict[str, Any]) -> ToolCallChunk:
        """A new call's first chunk: its id and name (the arguments follow)."""
        call = _Call(call_id=scrub(str(item["call_id"])), name=scrub(str(item["name"])))
        self._calls[str(item["id"])] = call
        return ToolCallChunk(call_id=call.call_id, name=call.name)

    def _whole(self, call: _Call, arguments: object) -> list[ModelChunk]:
        """A call's whole `arguments`, when no part of them was streamed before (an item
        added with them, or a server that sends only the closing events)."""
        if call.streamed or not isinstance(arguments, str) or not arguments:
            return []
        call.streamed = True
        return [ToolCallChunk(call_id=call.call_id, arguments_delta=call.joiner.feed(arguments))]

    def _named(self, response: dict[str, Any]) -> None:
        model = response.get("model")
        if isinstance(model, str):
            self.model = scrub(model)

    def _ended(self, response: dict[str, Any]) -> None:
        self._named(response)
        self.usage = usage_of(response.get("usage") or {}, prompt="input", completion="output")
        self.stopped = True
        details = response.get("incomplete_details") or {}
        reason = INCOMPLETE_REASONS.get(str(details.get("reason")))
        if reason is not None:
            self.finish_reason = reason
        elif self._refused:
            self.finish_reason = "refusal"
        else:
            self.finish_reason = "tool_calls" if self._calls else "end_turn"


def _text(error: dict[str, Any]) -> str:
    return scrub(" ".join(str(error.get("message") or "no detail").split()))[:300]
