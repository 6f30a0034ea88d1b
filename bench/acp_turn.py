"""One ACP turn end to end: a 200-token answer from a local OpenAI-compatible server.

Starts `bench/openai_server.py` on 127.0.0.1 (each request streams `--tokens` one-token
chunks), spawns `steerable-bridge acp --model openai:bench` pointed at it, and drives it
with the ACP SDK's client: `session/new`, then `--turns` prompts. For each turn it times
`session/prompt` from request to response and counts the `agent_message_chunk`s (tokens)
and all `session/update`s that arrived. Prints the median tokens/s and updates/s.
`--agent COMMAND` drives another ACP agent instead (given `STEERABLE_PROVIDER=openai_compat`,
`STEERABLE_MODEL=bench` and the base URL, as the first version of this system,
`steerable-sidecar-acp` from `steerable-sidecar==0.6.72`, reads them). `--src DIR` runs the
agent from another checkout (PYTHONPATH; the agent's working directory
is then a temporary one, so this checkout does not shadow it) to compare builds.
Run: `uv run python bench/acp_turn.py [--tokens 200] [--turns 7] [--src DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import schema as acp
from acp import spawn_agent_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openai_server import serve_in_thread


class Counter:
    def __init__(self) -> None:
        self.tokens = 0
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1
        if isinstance(update, acp.AgentMessageChunk):
            text = getattr(update.content, "text", "")
            self.tokens += text.count(" w")  # the fake model's tokens: " w0", " w1", ...

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))


async def run(
    base_url: str, turns: int, tokens: int, cwd: str, src: str = "", agent: str = ""
) -> list[tuple[float, int, int]]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OPENAI_"))},
        "STEERABLE_BASE_URL": base_url,
        "STEERABLE_STORAGE": "memory",
        # what another agent command (--agent) reads instead of --model
        "STEERABLE_PROVIDER": "openai_compat",
        "STEERABLE_MODEL": "bench",
    }
    if src:
        env["PYTHONPATH"] = src
    command = [agent] if agent else [sys.executable, "-m", "steerable_bridge.cli", "acp"]
    command += [] if agent else ["--model", "openai:bench"]
    counter = Counter()
    results = []
    async with spawn_agent_process(
        counter,
        *command,
        env=env,
        cwd=cwd,
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _process):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        block = acp.TextContentBlock(type="text", text="Write two hundred words.")
        await conn.prompt(session_id=session.session_id, prompt=[block])  # warm-up turn
        for _ in range(turns):
            counter.tokens = counter.updates = 0
            start = time.perf_counter()
            response = await conn.prompt(session_id=session.session_id, prompt=[block])
            elapsed = time.perf_counter() - start
            assert response.stop_reason == "end_turn", response
            assert counter.tokens == tokens, (counter.tokens, tokens)
            results.append((elapsed, counter.tokens, counter.updates))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--src", default="", help="run the agent from this checkout")
    parser.add_argument(
        "--agent", default="", help="another ACP agent command (e.g. steerable-sidecar-acp)"
    )
    args = parser.parse_args()
    base_url, stop = serve_in_thread(args.tokens)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cwd = tmp if args.src or args.agent else os.getcwd()
            results = asyncio.run(run(base_url, args.turns, args.tokens, cwd, args.src, args.agent))
    finally:
        stop()
    seconds = statistics.median(r[0] for r in results)
    tokens_s = statistics.median(r[1] / r[0] for r in results)
    updates_s = statistics.median(r[2] / r[0] for r in results)
    print(f"turns              {len(results)} (after one warm-up)")
    print(f"tokens per turn    {results[0][1]}  (updates per turn {results[0][2]})")
    print(f"turn time median   {seconds * 1000:7.1f} ms  (session/prompt request -> response)")
    print(f"tokens/s median    {tokens_s:9.0f}")
    print(f"updates/s median   {updates_s:9.0f}")


if __name__ == "__main__":
    main()
