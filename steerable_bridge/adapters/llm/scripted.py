"""The scripted model: replays a JSON script of rounds, one round per model call.

Tests and the conformance scenarios drive the loop with it (`--model scripted:PATH`). A
script is `{"rounds": [...], "loop": false}`; each round says what one model call streams:

    {"reasoning": "...", "text": "...",
     "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}],
     "finish_reason": "end_turn", "usage": {"prompt_tokens": 10, "completion_tokens": 5},
     "chunk_size": 4, "delay_ms": 0, "hang": false, "error": null, "violation": null}

Text and arguments are streamed in `chunk_size`-character pieces with `delay_ms` between
them; `hang: true` blocks after the content until cancelled (for cancel tests); `error`
raises `ProviderError(code, message)`; `violation` breaks the provider contract on purpose
(`no_response`, `chunk_after_response`, `two_responses`) so tests can prove the loop
catches it. One-off requests (compaction summaries) take `summary_rounds` instead, and
`overflow_at` makes the model refuse prompts over that many estimated tokens with
`context_overflow`, as a server enforcing a small window does. Rounds are consumed in
order by every provider made from the same script file in one process; with `loop: true`
they start over, otherwise running out is an error.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from steerable_bridge.runtime.model_context.tokens import estimate_request_tokens
from steerable_bridge.runtime.ports.model import (
    CONTEXT_OVERFLOW,
    FinishReason,
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from steerable_bridge.runtime.values import Usage

__all__ = ["Script", "ScriptedProvider", "load_script"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptToolCall(_Strict):
    id: str
    name: str
    arguments: JsonValue = Field(default_factory=dict)
    arguments_text: str | None = None
    """Raw argument text (may be invalid JSON on purpose); wins over `arguments`."""


class ScriptError(_Strict):
    code: str = "scripted_error"
    message: str = "the scripted model failed as its script says"


class ScriptUsage(_Strict):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_creation_tokens: int = 0


class Round(_Strict):
    reasoning: str | None = None
    text: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    usage: ScriptUsage = Field(default_factory=ScriptUsage)
    chunk_size: int = Field(default=0, ge=0)
    delay_ms: int = Field(default=0, ge=0)
    hang: bool = False
    error: ScriptError | None = None
    violation: Literal["no_response", "chunk_after_response", "two_responses"] | None = None


class Script(_Strict):
    rounds: list[Round]
    loop: bool = False
    context_window: int | None = None
    accepts_images: bool = True
    summary_rounds: list[Round] = Field(default_factory=list)
    """What one-off requests (compaction summaries) get, in order, starting over at the end;
    none: such a request fails with `script_no_summary` (the runtime's digest steps in)."""
    overflow_at: int | None = Field(default=None, ge=1)
    """Fail any request whose estimated prompt exceeds this many tokens with
    `context_overflow`, as a server enforcing its window does (no round is consumed)."""


def load_script(path: str | Path) -> Script:
    """Read and validate a script file; errors name the file and the bad field."""
    try:
        return Script.model_validate_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise ProviderError(
            "script_not_found", f"scripted model file {path} does not exist"
        ) from None
    except ValidationError as err:
        raise ProviderError(
            "invalid_script", f"scripted model file {path} is invalid: {err}"
        ) from None


class _Cursor:
    """The shared position in one script file."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.next = 0
        self.next_summary = 0

    def take(self) -> Round:
        rounds = self.script.rounds
        if self.next >= len(rounds):
            if not self.script.loop or not rounds:
                raise ProviderError(
                    "script_exhausted",
                    f"the scripted model has no round left (it has {len(rounds)});"
                    " add rounds to the script or set loop: true",
                )
            self.next = 0
        round_ = rounds[self.next]
        self.next += 1
        return round_

    def take_summary(self) -> Round:
        rounds = self.script.summary_rounds
        if not rounds:
            raise ProviderError(
                "script_no_summary", "the scripted model has no summary_rounds for a summary"
            )
        round_ = rounds[self.next_summary % len(rounds)]
        self.next_summary += 1
        return round_


_CURSORS: dict[str, _Cursor] = {}


class ScriptedProvider:
    """A `ModelProvider` replaying a script. Build with `for_path` or from a `Script`."""

    def __init__(self, script: Script, *, route: str = "scripted:inline") -> None:
        self._cursor = _Cursor(script)
        self._info = ModelInfo(
            route=route,
            context_window=script.context_window,
            accepts_images=script.accepts_images,
        )

    @classmethod
    def for_path(cls, path: str) -> ScriptedProvider:
        """A provider sharing the round position with every other one for `path`."""
        key = str(Path(path).resolve())
        cursor = _CURSORS.get(key)
        if cursor is None:
            cursor = _CURSORS[key] = _Cursor(load_script(path))
        provider = cls(cursor.script, route=f"scripted:{path}")
        provider._cursor = cursor
        return provider

    @property
    def info(self) -> ModelInfo:
        return self._info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        script = self._cursor.script
        limit = script.overflow_at
        if limit is not None and (size := estimate_request_tokens(request)) > limit:
            raise ProviderError(
                CONTEXT_OVERFLOW,
                f"the scripted model's window is {limit} tokens; the request has about {size}",
            )
        round_ = self._cursor.take_summary() if request.one_off else self._cursor.take()
        delay = round_.delay_ms / 1000

        async def pace() -> None:
            if delay:
                await anyio.sleep(delay)

        for piece in _pieces(round_.reasoning, round_.chunk_size):
            await pace()
            yield ReasoningChunk(delta=piece)
        for piece in _pieces(round_.text, round_.chunk_size):
            await pace()
            yield TextChunk(delta=piece)
        for call in round_.tool_calls:
            pieces = list(_pieces(_arguments_text(call), round_.chunk_size)) or [""]
            for index, piece in enumerate(pieces):
                await pace()
                yield ToolCallChunk(
                    call_id=call.id, name=call.name if index == 0 else None, arguments_delta=piece
                )
        if round_.hang:
            await anyio.sleep_forever()
        if round_.error is not None:
            raise ProviderError(round_.error.code, round_.error.message)
        if round_.violation == "no_response":
            return
        finish = round_.finish_reason or ("tool_calls" if round_.tool_calls else "end_turn")
        usage = Usage(**round_.usage.model_dump())
        yield ModelResponse(finish_reason=finish, usage=usage, model=self._info.route)
        if round_.violation == "chunk_after_response":
            yield TextChunk(delta="late")
        elif round_.violation == "two_responses":
            yield ModelResponse(finish_reason=finish, usage=usage)


def _arguments_text(call: ScriptToolCall) -> str:
    """The call's arguments as scripted: the raw text when given, else compact JSON."""
    if call.arguments_text is not None:
        return call.arguments_text
    return json.dumps(call.arguments, separators=(",", ":"))


def _pieces(text: str | None, size: int) -> Iterator[str]:
    """`text` in `size`-character pieces, made one at a time (a long reply split up front
    would hold a string object per piece for the whole call)."""
    if not text:
        return
    if size <= 0:
        yield text
        return
    for i in range(0, len(text), size):
        yield text[i : i + size]
