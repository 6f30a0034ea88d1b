"""OpenAI Chat Completions wire format: request bodies out, stream chunks in.

`request_body(request, ...)` turns an immutable `ModelRequest` into the JSON body of a
streaming `/chat/completions` call (system, user messages with text and `image_url` parts,
assistant messages with `tool_calls`, `tool` messages answering one call each — images a
tool returned follow those as one user message, since tool messages carry only text).
`ChunkDecoder` turns the decoded JSON of each streamed chunk into our `ModelChunk`s: text,
`reasoning_content` (or `reasoning`, as Ollama names it), and tool calls whose arguments
arrive in fragments — accumulated by `index`, with a new slot whenever a fragment carries
an id the slot has not seen (servers that stream parallel calls all at index 0). It also
collects the finish reason and usage (cached prompt tokens included), and repairs lone
UTF-16 surrogates as it goes (`runtime/encoding/surrogates.py`), so every chunk encodes as UTF-8.
A part the API takes only as text becomes `part_text.as_text(part)`; `usage_of` reads a
usage object of either OpenAI API. Pure data mapping: no I/O, used by `openai_compat.py`
and, for the messages and usage it shares, by `responses_wire.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from steerable_bridge.adapters.llm.part_text import as_text
from steerable_bridge.runtime.encoding.surrogates import SURROGATE, SurrogateJoiner, scrub_counted
from steerable_bridge.runtime.ports.model import (
    FinishReason,
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import (
    ImagePart,
    Message,
    ToolContent,
    Usage,
)

__all__ = [
    "FINISH_REASONS",
    "ChunkDecoder",
    "body_options",
    "layout",
    "openai_message",
    "request_body",
    "to_openai_messages",
    "usage_of",
]

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "refusal",
}
"""OpenAI finish reasons → ours; anything else a server invents counts as `end_turn`."""


def request_body(
    request: ModelRequest, *, model: str, accepts_images: bool, include_usage: bool = True
) -> dict[str, Any]:
    """The JSON body of one streaming Chat Completions call."""
    body: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request, accepts_images=accepts_images),
    }
    body.update(body_options(request, include_usage=include_usage))
    return body


def body_options(request: ModelRequest, *, include_usage: bool = True) -> dict[str, Any]:
    """The fields of `request_body` after `messages`, in order."""
    body: dict[str, Any] = {"stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": json.loads(tool.parameters_json),
                },
            }
            for tool in request.tools
        ]
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def to_openai_messages(request: ModelRequest, *, accepts_images: bool) -> list[dict[str, Any]]:
    """Our history as OpenAI messages, the system prompt first."""
    return [
        item if isinstance(item, dict) else openai_message(item, accepts_images)
        for item in layout(request, accepts_images=accepts_images)
    ]


def layout(request: ModelRequest, *, accepts_images: bool) -> Iterator[Message | dict[str, Any]]:
    """The OpenAI messages of `request` in order: each history message as itself (it is one
    OpenAI message, `openai_message`), the system prompt and the images tools returned as the
    OpenAI messages they become."""
    if request.system:
        yield {"role": "system", "content": request.system}
    images: list[dict[str, Any]] = []
    for message in request.messages:
        if images and message.role != "tool":
            yield _tool_images(images)
            images = []
        yield message
        if message.role == "tool" and accepts_images:
            images.extend(_user_part(p, True) for p in message.content if isinstance(p, ImagePart))
    if images:
        yield _tool_images(images)


def _tool_images(images: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool messages carry only text, so images tools returned follow as one user message
    (after the whole run of tool messages, which must directly follow their assistant)."""
    note = {"type": "text", "text": "Images returned by the tool calls above:"}
    return {"role": "user", "content": [note, *images]}


def openai_message(message: Message, accepts_images: bool) -> dict[str, Any]:
    """One history message as the OpenAI message it is."""
    if message.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json or "{}"},
                }
                for call in message.tool_calls
            ]
        return entry
    if message.role == "tool":
        texts = [
            f"[image ({part.mime_type}) attached below]"
            if isinstance(part, ImagePart) and accepts_images
            else as_text(part)
            for part in message.content
        ]
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": "\n".join(texts) or "(no output)",
        }
    if message.role == "system":
        return {"role": "system", "content": "\n".join(as_text(p) for p in message.content)}
    parts = [_user_part(part, accepts_images) for part in message.content]
    if all(part["type"] == "text" for part in parts):
        return {"role": "user", "content": "\n".join(part["text"] for part in parts)}
    return {"role": "user", "content": parts}


def _user_part(part: ToolContent, accepts_images: bool) -> dict[str, Any]:
    if isinstance(part, ImagePart) and accepts_images:
        return {
            "type": "image_url",
            "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"},
        }
    return {"type": "text", "text": as_text(part)}


_SEARCH = SURROGATE.search
"""`has_surrogates`, inlined below: this is the per-delta check."""


@dataclass(slots=True)
class _Slot:
    """One tool call being assembled from fragments."""

    call_id: str
    name: str | None = None
    announced: bool = False
    buffered: list[str] = field(default_factory=list)
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)


_Channel = str | int
"""Which stream of text a surrogate is held for: "text", "reasoning" or a call's index."""


class ChunkDecoder:
    """Folds streamed Chat Completions chunks into `ModelChunk`s, finish reason and usage.

    Every string it passes on encodes as UTF-8: text, reasoning and each call's arguments
    go through a `SurrogateJoiner` of their own (a pair split between chunks is joined; a
    high surrogate still held when another stream speaks, or at `flush`, becomes U+FFFD),
    ids, names and the model name through `scrub`. `replaced_surrogates` counts the repairs.
    """

    def __init__(self) -> None:
        self.finish_reason: FinishReason | None = None
        self.stopped = False  # the answer ends with the `[DONE]` line, never with an event
        self.usage = Usage()
        self.model: str | None = None
        self._model_raw: str | None = None
        self._slots: dict[int, _Slot] = {}
        self._calls = 0
        self._text = SurrogateJoiner()
        self._reasoning = SurrogateJoiner()
        self._holder: _Channel | None = None
        self._scrubbed = 0

    @property
    def replaced_surrogates(self) -> int:
        """Lone surrogates replaced with U+FFFD so far."""
        joiners = (self._text, self._reasoning, *(s.joiner for s in self._slots.values()))
        return self._scrubbed + sum(j.replaced for j in joiners)

    def feed(self, data: dict[str, Any]) -> list[ModelChunk]:
        """The chunks one decoded stream event yields (possibly none)."""
        out: list[ModelChunk] = []
        model = data.get("model")
        if isinstance(model, str) and model != self._model_raw:  # every chunk names it
            self._model_raw, self.model = model, self._clean(model)
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage = usage_of(usage)
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue  # nothing readable; a malformed call inside is reported below
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                if self._holder is not None or (not reasoning.isascii() and _SEARCH(reasoning)):
                    reasoning = self._join(out, "reasoning", self._reasoning, reasoning)
                if reasoning:
                    out.append(ReasoningChunk(delta=reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                if self._holder is not None or (not content.isascii() and _SEARCH(content)):
                    content = self._join(out, "text", self._text, content)
                if content:
                    out.append(TextChunk(delta=content))
            fragments = delta.get("tool_calls")
            for position, fragment in enumerate(fragments if isinstance(fragments, list) else ()):
                if not isinstance(fragment, dict):  # kept as the call's (non-object) arguments
                    fragment = {"index": position, "function": {"arguments": fragment}}
                out.extend(self._tool_fragment(fragment, position))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = FINISH_REASONS.get(reason, "end_turn")
        return out

    def flush(self) -> list[ModelChunk]:
        """What is still held: a surrogate whose pair never came (as U+FFFD), and calls
        whose name never arrived, so their arguments are not lost."""
        out: list[ModelChunk] = []
        self._release(out)
        for slot in self._slots.values():
            out.extend(_announce_unnamed(slot))
        return out

    def _join(
        self, out: list[ModelChunk], channel: _Channel, joiner: SurrogateJoiner, text: str
    ) -> str:
        """`text` through `joiner`; first, a surrogate another stream holds is let go."""
        if self._holder is not None and self._holder != channel:
            self._release(out)
        text = joiner.feed(text)
        if joiner.held:
            self._holder = channel
        return text

    def _release(self, out: list[ModelChunk]) -> None:
        """The held surrogate's stream ends here for it: it becomes U+FFFD in that stream."""
        holder, self._holder = self._holder, None
        if holder == "text":
            if tail := self._text.flush():
                out.append(TextChunk(delta=tail))
        elif holder == "reasoning":
            if tail := self._reasoning.flush():
                out.append(ReasoningChunk(delta=tail))
        elif isinstance(holder, int) and (slot := self._slots.get(holder)) is not None:
            tail = slot.joiner.flush()
            if tail and slot.announced:
                out.append(ToolCallChunk(call_id=slot.call_id, arguments_delta=tail))
            elif tail:
                slot.buffered.append(tail)

    def _clean(self, text: str) -> str:
        repaired, count = scrub_counted(text)
        self._scrubbed += count
        return repaired

    def _tool_fragment(self, fragment: dict[str, Any], position: int) -> list[ModelChunk]:
        index = fragment.get("index")
        if not isinstance(index, int):
            index = position
        call_id = fragment.get("id")
        call_id = self._clean(call_id) if isinstance(call_id, str) and call_id else None
        function = fragment.get("function") or {}
        if not isinstance(function, dict):  # the call reaches the loop, which tells the model
            function = {"arguments": function}
        name = function.get("name")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            # some servers send an object instead of text; anything else stays visible as
            # JSON, so the loop answers "not a JSON object" instead of running with {}
            arguments = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
        arguments = arguments or ""
        slot = self._slots.get(index)
        out: list[ModelChunk] = []
        if slot is None or (call_id and call_id != slot.call_id):
            if slot is not None:
                if self._holder == index:
                    self._release(out)
                out.extend(_announce_unnamed(slot))
            self._calls += 1
            slot = _Slot(call_id=call_id or f"call_{self._calls}")
            if index in self._slots:  # its repairs still count
                self._scrubbed += self._slots[index].joiner.replaced
            self._slots[index] = slot
        if isinstance(name, str) and name and slot.name is None:
            slot.name = self._clean(name)
        if arguments and (
            self._holder is not None or (not arguments.isascii() and _SEARCH(arguments))
        ):
            arguments = self._join(out, index, slot.joiner, arguments)
        if not slot.announced:
            if arguments:
                slot.buffered.append(arguments)
            if slot.name is not None:
                slot.announced = True
                out.append(
                    ToolCallChunk(
                        call_id=slot.call_id,
                        name=slot.name,
                        arguments_delta="".join(slot.buffered),
                    )
                )
                slot.buffered.clear()
        elif arguments:
            out.append(ToolCallChunk(call_id=slot.call_id, arguments_delta=arguments))
        return out


def _announce_unnamed(slot: _Slot) -> list[ModelChunk]:
    if slot.announced:
        return []
    slot.announced = True
    arguments = "".join(slot.buffered)
    slot.buffered.clear()
    return [ToolCallChunk(call_id=slot.call_id, name=slot.name or "", arguments_delta=arguments)]


def usage_of(
    data: dict[str, Any], *, prompt: str = "prompt", completion: str = "completion"
) -> Usage:
    """`Usage` from an OpenAI usage object: `{prompt}_tokens` and `{completion}_tokens`, the
    cached and reasoning tokens from their `_details` (the Responses API names the two
    `input` and `output`); a count that is not a whole number of at least 0 counts 0."""

    def count(value: Any) -> int:
        return value if isinstance(value, int) and value >= 0 else 0

    prompt_details = data.get(f"{prompt}_tokens_details") or {}
    completion_details = data.get(f"{completion}_tokens_details") or {}
    return Usage(
        prompt_tokens=count(data.get(f"{prompt}_tokens")),
        completion_tokens=count(data.get(f"{completion}_tokens")),
        cached_tokens=count(prompt_details.get("cached_tokens"))
        if isinstance(prompt_details, dict)
        else 0,
        reasoning_tokens=count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0,
    )
