"""Local fake model servers for real third-party agents: three provider wires, one script.

`FakeModel` is the scripted "brain": when the newest user message contains `trigger` (and no
tool result has come back since), it calls the first tool of `tool_preferences` that the
request offers (by name, or an MCP server's `server__name`), with the arguments given there;
once the tool's result is the newest thing in the conversation it answers `after_tool`; a
prompt holding `long_marker` (what `check acp`'s cancel probe asks for) gets `long_text`
streamed slowly (`long_pace` s an event); one holding `fail_marker` gets HTTP 400 (a turn
that fails at the model), so a cancel meets a running turn (a client that
hangs up on it before the end is counted in `cut_short`); otherwise it
answers `text`. It keeps no state between requests — the decision comes from the request
alone — so it serves agents that make side requests (titles, summaries, token counts) in any
order. Every request is recorded as a `Recorded` (path, JSON body, the text of each tool
result it carried, the reply chosen), so a test can assert e.g. that the tool result reached
the model.

`serve_fake_models(model)` runs one Starlette app under uvicorn on 127.0.0.1 (OS-picked port)
in a thread and yields a `FakeModelServer` whose `url` is the base (`.../v1`). The app speaks:

- OpenAI Chat Completions, `POST /v1/chat/completions`: `chat.completion.chunk` deltas (role,
  content, `tool_calls` with index/id/name then argument fragments), a `finish_reason` chunk,
  a usage chunk when `stream_options.include_usage`, then `[DONE]`; or one `chat.completion`
  JSON when `stream` is false. `GET /v1/models` lists the model.
- OpenAI Responses, `POST /v1/responses` (codex): `response.created`, `response.in_progress`,
  then per output item `response.output_item.added`, for a message `response.content_part.added`
  / `response.output_text.delta` / `.done` / `response.content_part.done`, for a call
  `response.function_call_arguments.delta` / `.done`, then `response.output_item.done`, and
  `response.completed` with usage.
- Anthropic Messages, `POST /v1/messages` (Claude Code): `message_start`, `ping`,
  `content_block_start` / `content_block_delta` (`text_delta` or `input_json_delta`) /
  `content_block_stop`, `message_delta` (stop_reason `end_turn` or `tool_use`, usage),
  `message_stop`; a JSON `message` when `stream` is false; `POST /v1/messages/count_tokens`.

SSE framing is sse-starlette's. Text is streamed in small deltas so clients see several chunks.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.prompt_server import PromptServer

__all__ = [
    "DEFAULT_TOOLS",
    "FakeModel",
    "FakeModelServer",
    "Recorded",
    "Reply",
    "serve_fake_models",
]

ToolScript = tuple[str, Mapping[str, Any]]
"""A tool name the fake calls when offered, and the arguments it calls it with."""

DEFAULT_TOOLS: tuple[ToolScript, ...] = (
    # Claude Code: Bash asks permission in the default mode.
    ("Bash", {"command": "touch fake-model-was-here.txt", "description": "Create a file"}),
    # codex: `shell` (argv) / `shell_command` (a string) / `exec_command` (unified exec).
    ("shell_command", {"command": "touch fake-model-was-here.txt"}),
    ("shell", {"command": ["bash", "-lc", "touch fake-model-was-here.txt"]}),
    ("exec_command", {"cmd": "touch fake-model-was-here.txt"}),
    # fast-agent's --shell tool.
    ("bash", {"command": "touch fake-model-was-here.txt"}),
    # steerable-bridge's own shell tool.
    ("run_command", {"command": "touch fake-model-was-here.txt"}),
    # The backend tool of tests/interop/servers/*.py (an MCP server's, for fast-agent).
    ("lookup", {"topic": "fake"}),
)
"""Tools real agents offer that need the user's permission, with arguments for each."""

CHUNK = 7
"""Characters per streamed text delta."""


@dataclass(frozen=True)
class Reply:
    """What the fake answers one request with: text, or one tool call."""

    text: str = ""
    tool: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    call_id: str = ""
    pace: float = 0.0
    """Seconds between streamed events (a long answer that a cancel can interrupt)."""
    error: bool = False
    """Answer HTTP 400 (an invalid request) instead: a turn that fails at the model."""

    @property
    def is_tool_call(self) -> bool:
        return bool(self.tool)


@dataclass(frozen=True)
class Recorded:
    """One request the fake received, and what it answered."""

    path: str
    body: Mapping[str, Any]
    tool_results: tuple[str, ...]
    """The text of every tool result in the conversation it carried."""
    last_user_text: str
    offered_tools: tuple[str, ...]
    reply: Reply


@dataclass(frozen=True)
class _Conversation:
    """The parts of a request the script decides on, read from any of the three wires."""

    last_user_text: str
    tool_results: tuple[str, ...]
    ends_with_tool_result: bool
    offered_tools: tuple[str, ...]


@dataclass
class FakeModel:
    """The script and the record (see the module docstring)."""

    text: str = "Hello from the fake model."
    after_tool: str = "The tool finished; that is all."
    trigger: str = "[use-a-tool]"
    fail_marker: str = "[fail-this-turn]"
    """A prompt holding this gets HTTP 400 from the model (check acp's --fail-prompt)."""
    long_marker: str = "count from 1 to 500"
    """A prompt holding this (check acp's cancel probe asks for it) gets `long_text`, slowly."""
    long_text: str = " ".join(str(n) for n in range(1, 501))
    long_pace: float = 0.02
    tool_preferences: Sequence[ToolScript] = DEFAULT_TOOLS
    model: str = "fake-model"
    requests: list[Recorded] = field(default_factory=list)
    cut_short: int = 0
    """How many paced (long) answers the client hung up on before their end: a cancel that
    reached the model."""
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cut: threading.Condition = field(default_factory=threading.Condition)

    def decide(self, path: str, body: Mapping[str, Any], seen: _Conversation) -> Reply:
        with self._lock:
            n = next(self._ids)
        reply = Reply(text=self.text)
        if seen.ends_with_tool_result:
            reply = Reply(text=self.after_tool)
        elif self.fail_marker in seen.last_user_text:
            reply = Reply(error=True)
        elif self.long_marker in seen.last_user_text:
            reply = Reply(text=self.long_text, pace=self.long_pace)
        elif self.trigger in seen.last_user_text:
            for wanted, arguments in self.tool_preferences:
                name = _offered(wanted, seen.offered_tools)
                if name:
                    reply = Reply(tool=name, arguments=arguments, call_id=f"call_fake_{n}")
                    break
        with self._lock:
            self.requests.append(
                Recorded(
                    path,
                    body,
                    seen.tool_results,
                    seen.last_user_text,
                    seen.offered_tools,
                    reply,
                )
            )
        return reply

    def reset(self, tool_preferences: Sequence[ToolScript] = DEFAULT_TOOLS) -> None:
        """Forget what was recorded and script the tool choice afresh (a fake shared by tests)."""
        with self._lock:
            self.requests.clear()
            self.tool_preferences = tool_preferences

    def hung_up(self) -> None:
        """Count a paced answer its client left before the end (see `cut_short`)."""
        with self._cut:
            self.cut_short += 1
            self._cut.notify_all()

    def await_cut_short(self, count: int, within: float) -> int:
        """`cut_short` once it reached `count`, or as it is after `within` seconds."""
        with self._cut:
            self._cut.wait_for(lambda: self.cut_short >= count, within)
            return self.cut_short

    def tool_calls(self) -> list[Recorded]:
        """The requests answered with a tool call."""
        return [r for r in self.requests if r.reply.is_tool_call]

    def saw_tool_result(self) -> bool:
        """True once a request carried the result of a call this fake made."""
        return any(r.tool_results for r in self.requests)


def _offered(wanted: str, offered: Sequence[str]) -> str:
    """The offered tool named `wanted`, or an MCP server's (`server__wanted`, `server-wanted`)."""
    for name in offered:
        if name == wanted or name.endswith((f"__{wanted}", f"-{wanted}", f".{wanted}")):
            return name
    return ""


def _text_of(content: Any) -> str:
    """The text in a message content: a string, or a list of typed parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and "content" in part:
                parts.append(_text_of(part["content"]))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def _read_chat(body: Mapping[str, Any]) -> _Conversation:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    results = tuple(_text_of(m.get("content")) for m in messages if m.get("role") == "tool")
    tools = tuple(
        str((t.get("function") or {}).get("name", ""))
        for t in body.get("tools") or []
        if isinstance(t, dict)
    )
    return _Conversation(
        _text_of(users[-1].get("content")) if users else "",
        results,
        bool(messages) and messages[-1].get("role") == "tool",
        tools,
    )


def _read_responses(body: Mapping[str, Any]) -> _Conversation:
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    items = [i for i in items if isinstance(i, dict)]
    users = [i for i in items if i.get("role") == "user"]
    outputs = ("function_call_output", "custom_tool_call_output")
    results = tuple(_text_of(i.get("output")) for i in items if i.get("type") in outputs)
    tools = tuple(str(t.get("name", "")) for t in body.get("tools") or [] if isinstance(t, dict))
    return _Conversation(
        _text_of(users[-1].get("content")) if users else "",
        results,
        bool(items) and items[-1].get("type") in outputs,
        tools,
    )


def _read_anthropic(body: Mapping[str, Any]) -> _Conversation:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]

    def blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
        content = message.get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [b for b in content or [] if isinstance(b, dict)]

    prompts = [
        m
        for m in messages
        if m.get("role") == "user" and any(b.get("type") == "text" for b in blocks(m))
    ]
    results = tuple(
        _text_of(b.get("content"))
        for m in messages
        for b in blocks(m)
        if b.get("type") == "tool_result"
    )
    last = blocks(messages[-1]) if messages and messages[-1].get("role") == "user" else []
    tools = tuple(str(t.get("name", "")) for t in body.get("tools") or [] if isinstance(t, dict))
    return _Conversation(
        _text_of(blocks(prompts[-1])) if prompts else "",
        results,
        any(b.get("type") == "tool_result" for b in last),
        tools,
    )


def _chunks(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def _sse(
    events: list[dict[str, Any]],
    *,
    named: bool,
    done: bool = False,
    pace: float = 0.0,
    model: FakeModel | None = None,
) -> Response:
    async def stream() -> AsyncIterator[ServerSentEvent]:
        finished = False
        try:
            for event in events:
                if pace:
                    await anyio.sleep(pace)  # a slow model; the client's disconnect cancels it
                yield ServerSentEvent(
                    data=json.dumps(event), event=str(event["type"]) if named else None
                )
            if done:
                yield ServerSentEvent(data="[DONE]")
            finished = True
        finally:
            if pace and not finished and model is not None:
                model.hung_up()

    return EventSourceResponse(stream(), ping=600)


# -- OpenAI Chat Completions ---------------------------------------------------------------


def _chat_events(reply: Reply, model: str, include_usage: bool) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.is_tool_call:
        args = json.dumps(reply.arguments)
        head = {"index": 0, "id": reply.call_id, "type": "function"}
        events.append(chunk({"tool_calls": [{**head, "function": {"name": reply.tool}}]}))
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            for part in _chunks(args)
        ]
        events.append(chunk({}, "tool_calls"))
    else:
        events += [chunk({"content": part}) for part in _chunks(reply.text)]
        events.append(chunk({}, "stop"))
    if include_usage:
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        events.append({**base, "choices": [], "usage": usage})
    return events


def _chat_json(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.is_tool_call:
        message["tool_calls"] = [
            {
                "id": reply.call_id,
                "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
            }
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.is_tool_call else "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


# -- OpenAI Responses ------------------------------------------------------------------------


def _responses_events(reply: Reply, model: str, n: int) -> list[dict[str, Any]]:
    response_id = f"resp_fake_{n}"
    shell = {
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": shell},
        {"type": "response.in_progress", "response": shell},
    ]
    if reply.is_tool_call:
        args = json.dumps(reply.arguments)
        item_id = f"fc_fake_{n}"
        item = {
            "id": item_id,
            "type": "function_call",
            "call_id": reply.call_id,
            "name": reply.tool,
            "arguments": "",
            "status": "in_progress",
        }
        done_item = {**item, "arguments": args, "status": "completed"}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events += [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item_id,
                "output_index": 0,
                "delta": part,
            }
            for part in _chunks(args)
        ]
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item_id,
                "output_index": 0,
                "arguments": args,
            }
        )
    else:
        item_id = f"msg_fake_{n}"
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {"item_id": item_id, "output_index": 0, "content_index": 0}
        done_part = {**part, "text": reply.text}
        done_item = {**item, "status": "completed", "content": [done_part]}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events.append({"type": "response.content_part.added", **at, "part": part})
        events += [
            {"type": "response.output_text.delta", **at, "delta": piece}
            for piece in _chunks(reply.text)
        ]
        events.append({"type": "response.output_text.done", **at, "text": reply.text})
        events.append({"type": "response.content_part.done", **at, "part": done_part})
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    usage = {
        "input_tokens": 11,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 18,
    }
    events.append(
        {
            "type": "response.completed",
            "response": {**shell, "status": "completed", "output": [done_item], "usage": usage},
        }
    )
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
    return events


# -- Anthropic Messages ----------------------------------------------------------------------


ANTHROPIC_USAGE: Mapping[str, int] = {
    "input_tokens": 11,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 7,
}
"""Usage as the real API reports it: the cache counts are always there (clients add them up)."""


def _anthropic_block(reply: Reply) -> dict[str, Any]:
    if reply.is_tool_call:
        return {"type": "tool_use", "id": reply.call_id, "name": reply.tool, "input": {}}
    return {"type": "text", "text": ""}


def _anthropic_events(reply: Reply, model: str, n: int) -> list[dict[str, Any]]:
    message = {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**ANTHROPIC_USAGE, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": _anthropic_block(reply)},
        {"type": "ping"},
    ]
    if reply.is_tool_call:
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in _chunks(json.dumps(reply.arguments))
        ]
    else:
        deltas = [{"type": "text_delta", "text": part} for part in _chunks(reply.text)]
    events += [{"type": "content_block_delta", "index": 0, "delta": d} for d in deltas]
    events.append({"type": "content_block_stop", "index": 0})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.is_tool_call else "end_turn",
                "stop_sequence": None,
            },
            "usage": ANTHROPIC_USAGE,
        }
    )
    events.append({"type": "message_stop"})
    return events


def _anthropic_json(reply: Reply, model: str, n: int) -> dict[str, Any]:
    block = (
        {"type": "tool_use", "id": reply.call_id, "name": reply.tool, "input": reply.arguments}
        if reply.is_tool_call
        else {"type": "text", "text": reply.text}
    )
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": "tool_use" if reply.is_tool_call else "end_turn",
        "stop_sequence": None,
        "usage": ANTHROPIC_USAGE,
    }


# -- the app ---------------------------------------------------------------------------------


_FAILURE = "the fake model refuses this request (the prompt asked it to fail)"
_OPENAI_ERROR = {"error": {"message": _FAILURE, "type": "invalid_request_error", "code": None}}
_ANTHROPIC_ERROR = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": _FAILURE},
}


def create_app(model: FakeModel) -> Starlette:
    """The three provider wires over one `FakeModel`."""
    counter = itertools.count(1)

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    async def chat(request: Request) -> Response:
        body = await body_of(request)
        reply = model.decide(request.url.path, body, _read_chat(body))
        if reply.error:
            return JSONResponse(_OPENAI_ERROR, status_code=400)
        name = str(body.get("model") or model.model)
        if not body.get("stream"):
            return JSONResponse(_chat_json(reply, name))
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = _chat_events(reply, name, usage)
        return _sse(events, named=False, done=True, pace=reply.pace, model=model)

    async def responses(request: Request) -> Response:
        body = await body_of(request)
        reply = model.decide(request.url.path, body, _read_responses(body))
        if reply.error:
            return JSONResponse(_OPENAI_ERROR, status_code=400)
        name = str(body.get("model") or model.model)
        events = _responses_events(reply, name, next(counter))
        return _sse(events, named=True, pace=reply.pace, model=model)

    async def messages(request: Request) -> Response:
        body = await body_of(request)
        reply = model.decide(request.url.path, body, _read_anthropic(body))
        if reply.error:
            return JSONResponse(_ANTHROPIC_ERROR, status_code=400)
        name = str(body.get("model") or model.model)
        if not body.get("stream"):
            return JSONResponse(_anthropic_json(reply, name, next(counter)))
        events = _anthropic_events(reply, name, next(counter))
        return _sse(events, named=True, pace=reply.pace, model=model)

    async def count_tokens(request: Request) -> Response:
        return JSONResponse({"input_tokens": 11})

    async def models(request: Request) -> Response:
        entry = {"id": model.model, "object": "model", "created": 0, "owned_by": "fake"}
        return JSONResponse({"object": "list", "data": [entry]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


@dataclass(frozen=True)
class FakeModelServer:
    """A running fake: `url` is the base of the API (`http://127.0.0.1:PORT/v1`)."""

    model: FakeModel
    root: str
    """`http://127.0.0.1:PORT`, for clients that add `/v1` themselves (Anthropic SDKs)."""

    @property
    def url(self) -> str:
        return f"{self.root}/v1"


@contextmanager
def serve_fake_models(model: FakeModel | None = None) -> Iterator[FakeModelServer]:
    """Run the fake under uvicorn on 127.0.0.1, an OS-picked port, in a thread; stop on exit."""
    model = model or FakeModel()
    config = uvicorn.Config(
        create_app(model), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = PromptServer(config)
    thread = server.start_in_thread(timeout_s=15)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield FakeModelServer(model, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
