"""Token estimates before a request is sent, calibrated against what providers report.

The loop needs to know how large a request is before it sends it: compaction fires on
pressure against the context window, budgets count tokens, usage displays show the fill.
No tokenizer ships for every local model, so the estimate is character based and aware
that CJK text (and other scripts without spaces) costs about one token per character while
Latin text costs about one per four. `TokenCalibration` then learns, per model, the ratio of
reported `prompt_tokens` to estimated tokens (ratio of sums, so long requests weigh more)
and applies it once it has seen `min_samples` requests. Pure computation: no I/O, no
imports from outside the runtime.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass

from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.values import (
    DiffContent,
    ImagePart,
    Message,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolContent,
)

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "RequestEstimator",
    "TokenCalibration",
    "estimate_message_tokens",
    "estimate_request_tokens",
    "estimate_text_tokens",
]

IMAGE_TOKENS = 800
"""A flat cost per image: providers bill a tile-dependent amount; this is a middle figure."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators a chat template adds around each message."""

_LATIN_CHARS_PER_TOKEN = 4.0


def _is_dense(code: int) -> bool:
    """True for characters that tokenizers split about one per token (CJK, kana, hangul)."""
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x2FA1F  # CJK extensions B and beyond
    )


def estimate_text_tokens(text: str) -> int:
    """Estimate the tokens of `text`: dense-script characters count one each, the rest /4."""
    if not text:
        return 0
    if text.isascii():
        return max(1, round(len(text) / _LATIN_CHARS_PER_TOKEN))
    dense = sum(1 for ch in text if ord(ch) >= 0x3040 and _is_dense(ord(ch)))
    other = len(text) - dense
    return max(1, dense + round(other / _LATIN_CHARS_PER_TOKEN))


def _part_tokens(part: ToolContent) -> int:
    if isinstance(part, TextPart):
        return estimate_text_tokens(part.text)
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    if isinstance(part, ResourcePart):
        return estimate_text_tokens(part.text or part.uri)
    if isinstance(part, DiffContent):
        return estimate_text_tokens(part.path) + estimate_text_tokens(part.new_text)
    if isinstance(part, TerminalContent):
        return estimate_text_tokens(part.terminal_id)
    raise TypeError(f"unknown content part {type(part).__name__}")


def estimate_message_tokens(message: Message) -> int:
    """Estimate one history message: content, reasoning, tool calls and the template overhead."""
    total = MESSAGE_OVERHEAD_TOKENS + sum(_part_tokens(p) for p in message.content)
    if message.reasoning:
        total += estimate_text_tokens(message.reasoning)
    for call in message.tool_calls:
        total += MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(call.name)
        total += estimate_text_tokens(call.arguments_json)
    return total


def estimate_request_tokens(request: ModelRequest) -> int:
    """Estimate the prompt tokens of `request` (system prompt, tools and every message)."""
    total = estimate_text_tokens(request.system) + MESSAGE_OVERHEAD_TOKENS
    for tool in request.tools:
        total += estimate_text_tokens(tool.name) + estimate_text_tokens(tool.description)
        total += estimate_text_tokens(tool.parameters_json) + MESSAGE_OVERHEAD_TOKENS
    return total + sum(estimate_message_tokens(m) for m in request.messages)


class RequestEstimator:
    """`estimate_request_tokens` for one session's requests, each costing what is new.

    A step's request holds the previous one's messages (the same objects, the history the
    log keeps) and a few more; the estimator remembers the running sums over the messages
    it saw last, so only the messages after the longest shared prefix are estimated again.
    The result always equals `estimate_request_tokens(request)`.
    """

    __slots__ = ("_messages", "_sums")

    def __init__(self) -> None:
        self._messages: tuple[Message, ...] = ()
        self._sums: array[int] = array("q", [0])
        """`_sums[i]`: the estimate of `_messages[:i]` (an array: 8 bytes a message, not
        an int object and a pointer; an idle thread's estimators each hold one)."""

    def estimate(self, request: ModelRequest) -> int:
        total = estimate_text_tokens(request.system) + MESSAGE_OVERHEAD_TOKENS
        for tool in request.tools:
            total += estimate_text_tokens(tool.name) + estimate_text_tokens(tool.description)
            total += estimate_text_tokens(tool.parameters_json) + MESSAGE_OVERHEAD_TOKENS
        messages, known = request.messages, self._messages
        if messages is not known:
            shared = len(known)
            if messages[:shared] != known:  # identity first: cheap when they are shared
                shared = 0
                while shared < min(len(known), len(messages)) and (
                    known[shared] is messages[shared]
                ):
                    shared += 1
            sums = self._sums
            del sums[shared + 1 :]
            running = sums[-1]
            for message in messages[shared:]:
                running += estimate_message_tokens(message)
                sums.append(running)
            self._messages = messages
        return total + self._sums[-1]


@dataclass(slots=True)
class _Sums:
    estimated: int = 0
    reported: int = 0
    samples: int = 0


class TokenCalibration:
    """Learns, per model, how the provider's `prompt_tokens` relate to our estimate.

    `observe(model, estimated, reported)` after each response that reports usage;
    `factor(model)` is the ratio of sums once `min_samples` observations exist, else 1.0;
    `calibrated(model, estimated)` applies it. Thread-safe: one instance may serve every
    session of a process.
    """

    def __init__(self, *, min_samples: int = 20) -> None:
        self.min_samples = min_samples
        self._sums: dict[str, _Sums] = {}
        self._lock = threading.Lock()

    def observe(self, model: str, estimated: int, reported: int) -> None:
        """Record one request's estimate and the provider's count (ignored when either is 0)."""
        if estimated <= 0 or reported <= 0:
            return
        with self._lock:
            sums = self._sums.setdefault(model, _Sums())
            sums.estimated += estimated
            sums.reported += reported
            sums.samples += 1

    def samples(self, model: str) -> int:
        with self._lock:
            sums = self._sums.get(model)
            return sums.samples if sums else 0

    def factor(self, model: str) -> float:
        """reported / estimated over every sample, or 1.0 before `min_samples` were seen."""
        with self._lock:
            sums = self._sums.get(model)
            if sums is None or sums.samples < self.min_samples or sums.estimated == 0:
                return 1.0
            return sums.reported / sums.estimated

    def calibrated(self, model: str, estimated: int) -> int:
        """`estimated` corrected by the model's learned factor."""
        return round(estimated * self.factor(model))
