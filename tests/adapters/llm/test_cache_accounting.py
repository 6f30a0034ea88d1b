"""Cache accounting for both providers, end to end: the `anthropic:` route through the
`steerable-bridge run` command against the fake API, and an `openai:` route's
`prompt_tokens_details.cached_tokens` reaching `usage_updated` through the loop."""

from __future__ import annotations

import json
import os
import sys

import anyio
import httpx
import pytest

from steerable_bridge.adapters.llm.openai_compat import OpenAICompatProvider, OpenAIConfig
from steerable_bridge.runtime import events as ev
from tests.runtime.harness import make_agent, of, prompt

from .fake_anthropic import Recorder, Stream, ok, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_run_command_on_an_anthropic_route_prints_the_answer_and_cache_counts() -> None:
    stream = Stream().start(input_tokens=30, read=2000, created=100).text("Hi ", "there.")
    rec = Recorder([ok(stream.stop())])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("API_KEY") and not k.startswith(("STEERABLE_", "ANTHROPIC_"))
    }
    async with serve(rec) as url:
        env["ANTHROPIC_BASE_URL"] = url
        with anyio.fail_after(30):
            done = await anyio.run_process(
                [
                    sys.executable,
                    "-m",
                    "steerable_bridge.cli",
                    "run",
                    "--jsonl",
                    "--model",
                    "anthropic:claude-x",
                    "hi",
                ],
                env=env,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    events = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    text = "".join(e["delta"] for e in events if e["kind"] == "text_delta")
    assert text == "Hi there."
    (update,) = [e for e in events if e["kind"] == "usage_updated"]
    assert (update["cache_read_tokens"], update["cache_creation_tokens"]) == (2000, 100)
    assert update["size"] == 200_000
    body = rec.requests[0]
    assert body["model"] == "claude-x"
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_openai_cached_prompt_tokens_reach_usage_updated() -> None:
    usage = {
        "prompt_tokens": 5000,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 4096},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": usage},
    ]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    body += b"data: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    provider = OpenAICompatProvider(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"),
        transport=httpx.MockTransport(handler),
    )
    session = await make_agent(provider).new_session("/work")
    try:
        _, seen = await prompt(session)
    finally:
        await provider.aclose()
    (update,) = of(seen, ev.UsageUpdated)
    assert (update.cache_read_tokens, update.cache_creation_tokens) == (4096, 0)
    assert of(seen, ev.RunFinished)[0].usage.cached_tokens == 4096
