"""The demo model: keyless, deterministic, and the default, so everything works offline.

It says it is the demo model and answers plainly. Words in the user's latest message ask it
to show a feature, so a person can see every part of both transports without a real LLM:

| say        | it shows                                                          |
|------------|-------------------------------------------------------------------|
| `think`    | reasoning (thought chunks) before the answer                      |
| `tool`     | a tool call (`calculate`), then an answer that uses the result     |
| `plan`     | a plan (`update_plan`) with three entries                         |
| `write`    | a file edit (`write_file`) — asks for permission first; without   |
|            | file tools it says `--workspace DIR` turns them on                 |
| `state`    | a shared-state change (`update_state`, AG-UI)                     |
| `error`    | a model error with a stable code                                  |
| a frontend tool's name | a call to that client-side tool (AG-UI)               |

It streams word by word with a small pace (`pace_ms`, zero in tests) and reports usage
as a rough count of words, so usage displays have something to show.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio

from steerable_bridge.runtime.ports.model import (
    ModelInfo,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)
from steerable_bridge.runtime.values import Message, Usage

__all__ = ["DemoProvider"]

INTRO = (
    "I am the steerable-bridge demo model: no real language model is behind me, so my"
    " answers are canned. Ask me to think, use a tool, make a plan, write a file, change"
    " the state, or show an error, and I will show you how that looks. To use a real model,"
    " start with --model openai:NAME and set STEERABLE_BASE_URL / STEERABLE_API_KEY."
)
NO_FILE_TOOLS = (
    "I have no file tools in this session, so I cannot write a file: start `serve` with"
    " --workspace DIR (or `run` without --no-workspace) to give me them."
)
INTRO_WITHOUT_FILES = INTRO.replace(" write a file,", "") + " " + NO_FILE_TOOLS


class DemoProvider:
    """A `ModelProvider` that scripts itself from the conversation."""

    def __init__(self, *, pace_ms: float = 15.0) -> None:
        self._pace = pace_ms / 1000
        self._info = ModelInfo(route="demo:default", context_window=8192, accepts_images=False)

    @property
    def info(self) -> ModelInfo:
        return self._info

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        last = request.messages[-1] if request.messages else None
        words_in = sum(len(m.text.split()) for m in request.messages) + len(request.system.split())
        out: list[str] = []
        tools = {tool.name: tool for tool in request.tools}
        if last is not None and last.role == "tool":
            reply = _after_tool(request.messages)
            async for chunk in self._text(reply, out):
                yield chunk
            yield self._done("end_turn", words_in, out)
            return
        said = (last.text if last is not None else "").lower()
        if "error" in said:
            raise ProviderError(
                "demo_error",
                "this is the demo model's example error (you asked for one); send another"
                " message to continue",
            )
        if "think" in said or "reason" in said:
            thought = (
                "The user wants to see reasoning. I will think out loud in short steps, then"
                " give a plain answer."
            )
            for word in _words(thought):
                await self._sleep()
                out.append(word)
                yield ReasoningChunk(delta=word)
        call = _pick_call(said, tools)
        if call is not None:
            name, arguments = call
            async for chunk in self._text(f"Let me use {name}.", out):
                yield chunk
            text = json.dumps(arguments)
            call_id = f"call_{len(request.messages)}_{name}"
            for index, piece in enumerate(_slices(text, 12)):
                await self._sleep()
                yield ToolCallChunk(
                    call_id=call_id, name=name if index == 0 else None, arguments_delta=piece
                )
            yield self._done("tool_calls", words_in, out)
            return
        async for chunk in self._text(_answer(said, "write_file" in tools), out):
            yield chunk
        yield self._done("end_turn", words_in, out)

    async def _text(self, text: str, out: list[str]) -> AsyncIterator[TextChunk]:
        for word in _words(text):
            await self._sleep()
            out.append(word)
            yield TextChunk(delta=word)

    async def _sleep(self) -> None:
        if self._pace:
            await anyio.sleep(self._pace)

    def _done(self, finish: str, words_in: int, out: list[str]) -> ModelResponse:
        usage = Usage(prompt_tokens=words_in, completion_tokens=len(out))
        return ModelResponse(finish_reason=finish, usage=usage, model="demo")  # type: ignore[arg-type]


def _pick_call(said: str, tools: dict[str, ToolSpec]) -> tuple[str, dict[str, object]] | None:
    for name in tools:
        if name.lower() in said and name not in _BUILTIN_CALLS:
            return name, _example_arguments(tools[name])
    for word, (name, arguments) in _BUILTIN_CALLS.items():
        if word in said and name in tools:
            return name, arguments
    return None


_BUILTIN_CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "tool": ("calculate", {"expression": "6 * 7"}),
    "calculate": ("calculate", {"expression": "6 * 7"}),
    "plan": (
        "update_plan",
        {
            "entries": [
                {"content": "Understand the request", "status": "completed", "priority": "high"},
                {"content": "Show a plan in the client", "status": "in_progress"},
                {"content": "Answer the user", "status": "pending", "priority": "low"},
            ]
        },
    ),
    "write": ("write_file", {"path": "demo-note.txt", "content": "Written by the demo model.\n"}),
    "state": ("update_state", {"patch": [{"op": "add", "path": "/demo", "value": "changed"}]}),
}


def _example_arguments(tool: ToolSpec) -> dict[str, object]:
    schema = json.loads(tool.parameters_json)
    arguments: dict[str, object] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        arguments[key] = {
            "number": 1,
            "integer": 1,
            "boolean": True,
            "array": [],
            "object": {},
        }.get(str(kind), "demo")
    return arguments


def _answer(said: str, files: bool) -> str:
    """The plain answer; `files` says whether the session has the file tools."""
    intro = INTRO if files else INTRO_WITHOUT_FILES
    if not said.strip() or "help" in said or "hello" in said or said.strip() == "hi":
        return intro
    if "think" in said or "reason" in said:
        return (
            "Having thought about it: this is how reasoning appears, folded away from the answer."
        )
    if "write" in said and not files:
        return NO_FILE_TOOLS
    return f"You said: {said.strip()[:200]}. " + intro


def _after_tool(messages: tuple[Message, ...]) -> str:
    results = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    results.reverse()
    parts = []
    for message in results:
        status = "failed" if message.is_error else "returned"
        parts.append(f"The tool {status}: {message.text[:300] or '(no text)'}")
    return " ".join(parts) + " That is how a tool call looks."


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def _slices(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
