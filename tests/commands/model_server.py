"""A local OpenAI-compatible model server for end-to-end tests of the quality layer.

`POST /v1/chat/completions` streams Chat Completions chunks. What it answers depends on the
requested model name and the request, so it needs no state between requests:

- `text-caller`: while no tool result is in the conversation, writes its call to
  `read_file` as Hermes/Qwen text (`<tool_call>{...}</tool_call>`), split into small
  deltas, as a model served without a tool parser does; once a tool result is there, it
  answers with a sentence quoting it.
- `repeater`: whenever tools are offered, makes the same real `read_file` call again; when
  offered none, gives up with a final sentence.
- `fmt-KEY`: like `text-caller`, but writes its call in the format `FORMATS[KEY]` names
  (GLM, Kimi, harmony, Qwen3-Coder, Seed-OSS, Mistral v11, bare JSON or pythonic after
  prose), most with reasoning written as text before it, in 3-character deltas.
- `think-KEY`: no call; answers with `THINKING[KEY]`, reasoning written as text and then
  the answer, in 3-character deltas.
- `surrogates`: escapes lone UTF-16 surrogates into its JSON, as a broken server does. While
  no tool result is in the conversation, streams text with an emoji split into one-unit
  chunks (`"\ud83d"`, then `"\ude00"`) and a lone `"\ud800"`, then a `read_file` call whose
  arguments hold another split emoji and a lone `"\udfff"`; afterwards, a sentence with a
  lone `"\udc00"`.

`serve_in_thread()` runs it with uvicorn on 127.0.0.1, port 0; it returns the base URL, the
recorded request bodies and a stop function. SSE framing by sse-starlette.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from tests.prompt_server import PromptServer

CALL_TEXT = (
    "I'll read it.\n<tool_call>\n"
    '{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'
)
SURROGATE_TEXT = ["Hi ", "\ud83d", "\ude00", " lone \ud800 end"]
SURROGATE_ARGS = ['{"path": "', "\ud83d", "\ude00", '\udfff.txt"}']
FINAL_REPEATER = "I kept getting the same file, so here is what it says."

FORMATS: dict[str, tuple[str, str, str]] = {
    "glm": (
        "<think>The user wants a.txt.</think>\n\nI'll read it.\n<tool_call>read_file\n"
        "<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n</tool_call>",
        "\n\nI'll read it.\n",
        "The user wants a.txt.",
    ),
    "kimi": (
        "I'll read it. <|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0"
        '<|tool_call_argument_begin|>{"path": "a.txt"}<|tool_call_end|>'
        "<|tool_calls_section_end|>",
        "I'll read it. ",
        "",
    ),
    "harmony": (
        "<|channel|>analysis<|message|>The user wants a.txt.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>"
        '{"path": "a.txt"}<|call|>',
        "",
        "The user wants a.txt.",
    ),
    "qwen3coder": (
        "<think>Read the file.</think>\n<tool_call>\n<function=read_file>\n<parameter=path>\n"
        "a.txt\n</parameter>\n</function>\n</tool_call>",
        "",
        "Read the file.",
    ),
    "seed": (
        "<seed:think>Need the file.</seed:think><seed:tool_call>\n<function=read_file>\n"
        "<parameter=path>\na.txt\n</parameter>\n</function>\n</seed:tool_call>",
        "",
        "Need the file.",
    ),
    "mistral": ('[TOOL_CALLS]read_file{"path": "a.txt"}', "", ""),
    "bare_json": (
        'I\'ll read it.\n{"name": "read_file", "arguments": {"path": "a.txt"}}',
        "I'll read it.\n",
        "",
    ),
    "pythonic": ("<think>One call.</think>I'll read it: [read_file(path='a.txt')]",
                 "I'll read it: ", "One call."),
}  # fmt: skip
"""Per format: what the model writes, what the user must see of it, and its reasoning."""

THINKING: dict[str, tuple[str, str, str]] = {
    "qwen3": ("<think>\nA greeting.\n</think>\n\nHello!", "\n\nHello!", "\nA greeting.\n"),
    "seed": ("<seed:think>A greeting.</seed:think>Hello!", "Hello!", "A greeting."),
    "harmony": (
        "<|channel|>analysis<|message|>A greeting.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Hello!<|return|>",
        "Hello!",
        "A greeting.",
    ),
    "minimax": ("<think>A greeting.</think>Hello!", "Hello!", "A greeting."),
}
"""Per family: a reply with reasoning written as text, what is shown, and the reasoning."""


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "chatcmpl-e2e", "object": "chat.completion.chunk",
                       "model": model, "choices": [choice], **extra})  # fmt: skip


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]


def app(requests: list[dict[str, Any]]) -> Starlette:
    async def completions(request: Request) -> EventSourceResponse:
        body = await request.json()
        requests.append(body)
        model = str(body.get("model"))
        results = _tool_results(body)

        async def events() -> AsyncIterator[str]:
            yield _chunk(model, {"role": "assistant", "content": ""})
            finish = "stop"
            written = FORMATS[model[4:]][0] if model.startswith("fmt-") else CALL_TEXT
            if model.startswith("think-"):
                reply = THINKING[model[6:]][0]
                for i in range(0, len(reply), 3):
                    yield _chunk(model, {"content": reply[i : i + 3]})
            elif (model == "text-caller" or model.startswith("fmt-")) and not results:
                step = 5 if model == "text-caller" else 3
                for i in range(0, len(written), step):
                    yield _chunk(model, {"content": written[i : i + step]})
            elif model == "text-caller" or model.startswith("fmt-"):
                yield _chunk(model, {"content": f"The file says: {results[-1]}"})
            elif model == "surrogates" and not results:
                for piece in SURROGATE_TEXT:
                    yield _chunk(model, {"content": piece})
                for index, piece in enumerate(SURROGATE_ARGS):
                    function = {"arguments": piece, **({"name": "read_file"} if not index else {})}
                    call = {"index": 0, "function": function}
                    if not index:
                        call |= {"id": "call_s", "type": "function"}
                    yield _chunk(model, {"tool_calls": [call]})
                finish = "tool_calls"
            elif model == "surrogates":
                yield _chunk(model, {"content": "Read it \udc00 fine."})
            elif body.get("tools"):
                n = len(results)
                function = {"name": "read_file", "arguments": '{"path": "a.txt"}'}
                call = {"index": 0, "id": f"call_{n}", "type": "function", "function": function}
                yield _chunk(model, {"tool_calls": [call]})
                finish = "tool_calls"
            else:
                yield _chunk(model, {"content": FINAL_REPEATER})
            usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
            yield _chunk(model, {}, finish, usage=usage)
            yield "[DONE]"

        return EventSourceResponse(events(), ping=3600)

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def serve_in_thread() -> tuple[str, list[dict[str, Any]], Callable[[], None]]:
    """Start the server; returns (base URL, recorded request bodies, stop)."""
    requests: list[dict[str, Any]] = []
    config = uvicorn.Config(app(requests), host="127.0.0.1", port=0, log_level="warning")
    server = PromptServer(config)
    thread = server.start_in_thread()
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}/v1", requests, stop
