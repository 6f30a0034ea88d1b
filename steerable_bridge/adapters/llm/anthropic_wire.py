"""Anthropic Messages wire format: request bodies out, stream events in.

`request_body(request, ...)` turns an immutable `ModelRequest` into the JSON body of a
streaming `POST /v1/messages` call: the system prompt as a text block, user turns with text,
image and document blocks, assistant turns with their signed thinking (or redacted thinking)
blocks first, then text, then `tool_use` blocks (documents are embedded text, a base64 PDF
`data:` URI or a PDF URL), and every run of tool results folded into
the one user turn that must follow the assistant's calls. Consecutive turns of one role are
merged, since the API wants them alternating. Cache breakpoints are placed afterwards by
`cache_shaping.py` on the finished body.

`EventDecoder` folds the stream's events (`message_start`, `content_block_start` /
`content_block_delta` / `content_block_stop` with `text_delta`, `input_json_delta`,
`thinking_delta`, `signature_delta`; `redacted_thinking` blocks; `message_delta` with the
stop reason and cumulative usage; `message_stop`; `ping`; `error`) into our `ModelChunk`s,
the finish reason and `Usage` (cache read and cache creation tokens included; Anthropic's
`input_tokens` excludes both, so our `prompt_tokens` is their sum), repairing lone UTF-16
surrogates as it goes (`runtime/encoding/surrogates.py`) so every chunk encodes as UTF-8. Pure data
mapping: no I/O, used only by `anthropic.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from steerable_bridge.adapters.llm.part_text import as_text
from steerable_bridge.runtime.encoding.surrogates import SurrogateJoiner, scrub, scrub_counted
from steerable_bridge.runtime.errors import CodedError
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
    ResourcePart,
    ToolContent,
    Usage,
)

__all__ = [
    "IMAGE_TYPES",
    "STOP_REASONS",
    "EventDecoder",
    "StreamFailure",
    "request_body",
    "to_anthropic_messages",
]

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}
"""Anthropic stop reasons → ours; an unknown one counts as `end_turn`."""

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types the Messages API accepts as base64 sources."""

Block = dict[str, Any]
_PDF_DATA = "data:application/pdf;base64,"


def request_body(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int,
    accepts_images: bool,
    thinking_budget: int | None = None,
) -> dict[str, Any]:
    """The JSON body of one streaming Messages call (no cache breakpoints yet)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or max_tokens,
        "messages": to_anthropic_messages(request.messages, accepts_images=accepts_images),
        "stream": True,
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        body["tools"] = [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": json.loads(tool.parameters_json),
            }
            for tool in request.tools
        ]
    if thinking_budget:
        # The budget must leave room for the answer: max_tokens has to exceed it.
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
        body["max_tokens"] = max(body["max_tokens"], thinking_budget + 1024)
    elif request.temperature is not None:  # the API refuses a temperature with thinking on
        body["temperature"] = request.temperature
    return body


def to_anthropic_messages(
    messages: tuple[Message, ...], *, accepts_images: bool
) -> list[dict[str, Any]]:
    """Our history as alternating Messages-API turns."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _turn(message, accepts_images)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous: list[Block] = out[-1]["content"]
            if role == "user" and _is_result(blocks[0]):
                # tool results must lead the user turn that answers the calls
                split = next((i for i, b in enumerate(previous) if not _is_result(b)), None)
                if split is not None:
                    previous[split:split] = [b for b in blocks if _is_result(b)]
                    blocks = [b for b in blocks if not _is_result(b)]
            previous.extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})
    return out


def _is_result(block: Block) -> bool:
    return block.get("type") == "tool_result"


def _turn(message: Message, accepts_images: bool) -> tuple[str, list[Block]]:
    if message.role == "assistant":
        return "assistant", _assistant_blocks(message)
    if message.role == "tool":
        result: Block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": [_part(p, accepts_images, in_result=True) for p in message.content]
            or [{"type": "text", "text": "(no output)"}],
        }
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    blocks = [_part(p, accepts_images, in_result=False) for p in message.content]
    return "user", [b for b in blocks if b.get("type") != "text" or b["text"]]


def _assistant_blocks(message: Message) -> list[Block]:
    blocks: list[Block] = []
    for thought in message.thinking:
        if thought.redacted_data is not None:
            blocks.append({"type": "redacted_thinking", "data": thought.redacted_data})
        elif thought.signature:
            blocks.append(
                {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
            )
        # unsigned reasoning (another provider's) cannot be sent back; the API would refuse it
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": _input(call)}
        )
    return blocks


def _input(call: Any) -> Any:
    """A call's arguments as the JSON object `tool_use.input` must be."""
    try:
        value = json.loads(call.arguments_json or "{}")
    except ValueError:
        return {"_unparsed_arguments": call.arguments_json}
    return value if isinstance(value, dict) else {"_arguments": value}


def _part(part: ToolContent, accepts_images: bool, *, in_result: bool) -> Block:
    if isinstance(part, ImagePart) and accepts_images and part.mime_type in IMAGE_TYPES:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
    if isinstance(part, ResourcePart) and not in_result:
        source = _document_source(part)
        if source is not None:
            title = part.name or (None if part.uri.startswith("data:") else part.uri)
            return {"type": "document", "source": source, **({"title": title} if title else {})}
    return {"type": "text", "text": as_text(part)}


def _document_source(part: ResourcePart) -> Block | None:
    """A `document` source for embedded text, a base64 PDF data URI or a PDF on the web."""
    if part.text is not None:
        return {"type": "text", "media_type": "text/plain", "data": part.text}
    if part.uri.startswith(_PDF_DATA):
        return {
            "type": "base64",
            "media_type": "application/pdf",
            "data": part.uri[len(_PDF_DATA) :],
        }
    if part.mime_type == "application/pdf" and part.uri.startswith(("https://", "http://")):
        return {"type": "url", "url": part.uri}
    return None


# -- the stream -------------------------------------------------------------------------------


class StreamFailure(CodedError):
    """The stream carried an `error` event, or broke the event grammar: `code` is the
    event's error type (`invalid_event` for a broken grammar), `message` its text."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(scrub(error_type), scrub(message))

    @property
    def error_type(self) -> str:
        """The Messages API's name for `code` (`overloaded_error`, say)."""
        return self.code


@dataclass(slots=True)
class _Block:
    """One content block being streamed."""

    type: str
    call_id: str = ""
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)

    def chunk(self, text: str) -> ModelChunk:
        """`text` as this block's kind of chunk."""
        if self.type == "tool_use":
            return ToolCallChunk(call_id=self.call_id, arguments_delta=text)
        if self.type == "thinking":
            return ReasoningChunk(delta=text)
        return TextChunk(delta=text)


class EventDecoder:
    """Folds Messages-API stream events into `ModelChunk`s, the finish reason and usage.

    Every string it passes on encodes as UTF-8: each block's text goes through a
    `SurrogateJoiner` (a pair split between deltas is joined; a surrogate still held when
    the block stops becomes U+FFFD), ids, names, signatures and the model name through
    `scrub`; `replaced_surrogates` counts the repairs.
    """

    def __init__(self) -> None:
        self.finish_reason: FinishReason | None = None
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.started = False
        self.stopped = False
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}
        self._replaced = 0

    @property
    def replaced_surrogates(self) -> int:
        """Lone surrogates replaced with U+FFFD so far."""
        return self._replaced + sum(block.joiner.replaced for block in self._blocks.values())

    def flush(self) -> list[ModelChunk]:
        """Surrogates held by blocks that never stopped, as U+FFFD chunks."""
        out: list[ModelChunk] = []
        for block in self._blocks.values():
            if tail := block.joiner.flush():
                out.append(block.chunk(tail))
        return out

    def _clean(self, text: str) -> str:
        repaired, count = scrub_counted(text)
        self._replaced += count
        return repaired

    @property
    def usage(self) -> Usage:
        u = self._usage
        read = u.get("cache_read_input_tokens", 0)
        created = u.get("cache_creation_input_tokens", 0)
        return Usage(
            prompt_tokens=u.get("input_tokens", 0) + read + created,
            completion_tokens=u.get("output_tokens", 0),
            cached_tokens=read,
            cache_creation_tokens=created,
        )

    def feed(self, data: dict[str, Any]) -> list[ModelChunk]:
        """The chunks one decoded stream event yields (possibly none)."""
        kind = data.get("type")
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_start":
            return self._start(data)
        if kind == "content_block_stop":
            return self._stop(data)
        if kind == "message_start":
            message = data.get("message") or {}
            self.started = True
            if isinstance(message.get("model"), str):
                self.model = self._clean(message["model"])
            self._take_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            reason = delta.get("stop_reason")
            if isinstance(reason, str) and reason:
                self.stop_reason = reason
                self.finish_reason = STOP_REASONS.get(reason, "end_turn")
            self._take_usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
            if self.finish_reason is None:
                self.finish_reason = "end_turn"
        elif kind == "error":
            error = data.get("error") or {}
            raise StreamFailure(
                str(error.get("type") or "error"), str(error.get("message") or "no detail")
            )
        return []  # ping and event types added to the API later carry nothing we use

    def _take_usage(self, usage: Any) -> None:
        """`message_start` carries the input side, `message_delta` cumulative totals."""
        if not isinstance(usage, dict):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            value = usage.get(key)
            if isinstance(value, int) and value >= 0:
                self._usage[key] = value

    def _start(self, data: dict[str, Any]) -> list[ModelChunk]:
        index = data.get("index")
        block = data.get("content_block") or {}
        kind = block.get("type")
        if not isinstance(index, int) or not isinstance(kind, str):
            raise StreamFailure("invalid_event", f"content_block_start without index/type: {data}")
        if kind == "tool_use":
            call_id = self._clean(str(block.get("id") or f"toolu_{index}"))
            self._blocks[index] = _Block(type=kind, call_id=call_id)
            initial = block.get("input")
            # input arrives as input_json_delta fragments; a non-empty start value is the whole
            # (json.dumps escapes any surrogate it holds, so the text is plain ASCII there)
            arguments = json.dumps(initial, separators=(",", ":")) if initial else ""
            name = self._clean(str(block.get("name") or ""))
            return [ToolCallChunk(call_id=call_id, name=name, arguments_delta=arguments)]
        opened = self._blocks[index] = _Block(type=kind)
        if kind == "text" and block.get("text"):
            text = opened.joiner.feed(str(block["text"]))
            return [TextChunk(delta=text)] if text else []
        if kind == "thinking" and block.get("thinking"):
            text = opened.joiner.feed(str(block["thinking"]))
            return [ReasoningChunk(delta=text)] if text else []
        if kind == "redacted_thinking":
            sealed = self._clean(str(block.get("data") or ""))
            return [ReasoningChunk(delta="", redacted_data=sealed)]
        return []

    def _delta(self, data: dict[str, Any]) -> list[ModelChunk]:
        block = self._blocks.get(data.get("index"))  # type: ignore[arg-type]
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if block is None:
            raise StreamFailure("invalid_event", f"content_block_delta for no open block: {data}")
        if kind == "text_delta":
            text = block.joiner.feed(str(delta.get("text") or ""))
            return [TextChunk(delta=text)] if text else []
        if kind == "input_json_delta":
            partial = delta.get("partial_json") or ""
            if not isinstance(partial, str):  # kept visible, so the loop says what is wrong
                partial = json.dumps(partial, separators=(",", ":"), ensure_ascii=False)
            partial = block.joiner.feed(partial)
            return (
                [ToolCallChunk(call_id=block.call_id, arguments_delta=partial)] if partial else []
            )
        if kind == "thinking_delta":
            thinking = block.joiner.feed(str(delta.get("thinking") or ""))
            return [ReasoningChunk(delta=thinking)] if thinking else []
        if kind == "signature_delta":
            signature = self._clean(str(delta.get("signature") or ""))
            if not signature:
                return []
            tail = block.joiner.flush()  # the seal ends the block's text
            return [ReasoningChunk(delta=tail, signature=signature)]
        return []  # citations_delta and later additions: nothing we show yet

    def _stop(self, data: dict[str, Any]) -> list[ModelChunk]:
        index = data.get("index")
        block = self._blocks.pop(index, None)  # type: ignore[arg-type]
        if block is None:
            raise StreamFailure("invalid_event", f"content_block_stop for no open block: {data}")
        self._replaced += block.joiner.replaced
        tail = block.joiner.flush()
        if tail:
            self._replaced += 1
            return [block.chunk(tail)]
        return []
