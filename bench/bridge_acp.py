"""What the ACP bridge (`serve --acp-agent`) adds per event: latency and throughput.

The same child agent (`steerable-bridge acp --model scripted:...`, one long answer in
`--chunk`-character pieces) answers prompts from a plain SDK client (direct:
`session/update` notifications counted as they arrive) and through the bridge (`AcpBridge`
as the turn engine of our `Agent`, behind `LocalPort`, memory store: LoopEvents counted at
the run's sink, after the log, the facts and the commits). Throughput: the answer streamed
with no pause, updates per second from the first text update to the last one received
(direct) or delivered (bridged; after a warm-up prompt, so the child session exists).
Added latency: the answer paced like a model stream (`--pace-ms` between chunks), and for
each chunk the time from its notification reaching the bridge's client to its `text_delta`
reaching the sink (p50 / p99 / max). Best of `--repeats` prompts each.

    uv run python bench/bridge_acp.py [--chars 40000] [--chunk 8] [--pace-ms 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from acp import PROTOCOL_VERSION, spawn_agent_process
from acp import schema as s

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.turns.turn import TurnInput
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.acp.bridge import ROUTE_PROVIDER, AcpBridge, BridgedAgentRoute


def child(script: Path) -> list[str]:
    return [
        sys.executable, "-m", "steerable_bridge", "acp",
        "--model", f"scripted:{script}", "--storage", "memory",
    ]  # fmt: skip


class _Counter:
    def __init__(self) -> None:
        self.times: list[int] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, s.AgentMessageChunk):
            self.times.append(time.perf_counter_ns())

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not asked in this bench")

    def on_connect(self, conn: Any) -> None:
        return None


async def direct(argv: list[str], repeats: int) -> float:
    """Best text updates per second a plain client receives."""
    best = 0.0
    counter = _Counter()
    async with (
        spawn_agent_process(
            counter,  # type: ignore[arg-type]
            argv[0],
            *argv[1:],
            transport_kwargs={"stderr": subprocess.DEVNULL, "limit": 64 * 1024 * 1024},
        ) as (conn, _)
    ):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        for _ in range(repeats):
            session = await conn.new_session(cwd="/", mcp_servers=[])
            counter.times.clear()
            await conn.prompt(
                session_id=session.session_id, prompt=[s.TextContentBlock(type="text", text="go")]
            )
            span = (counter.times[-1] - counter.times[0]) / 1e9
            best = max(best, (len(counter.times) - 1) / span)
    return best


async def bridged(argv: list[str], repeats: int) -> tuple[float, list[float]]:
    """Best events per second at the sink, and the added latency (ms) of every text chunk."""
    bridge = AcpBridge(argv, cwd="/", name="bench")
    router = ModelRouter()
    router.register(ROUTE_PROVIDER, BridgedAgentRoute)
    agent = Agent(
        router=router,
        store=MemoryStore(),
        config=AgentConfig(model=f"{ROUTE_PROVIDER}:bench"),
        engine=bridge,
    )
    arrived: list[int] = []
    original = bridge.client.session_update

    async def stamped(session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, s.AgentMessageChunk):
            arrived.append(time.perf_counter_ns())
        await original(session_id, update, **kwargs)

    bridge.client.session_update = stamped  # type: ignore[method-assign]
    best = 0.0
    added: list[float] = []
    async with bridge.running():
        port = LocalPort(agent)
        conversation = (await port.open("/")).conversation_id
        delivered: list[int] = []

        async def sink(event: LoopEvent) -> None:
            if isinstance(event, ev.TextDelta):
                delivered.append(time.perf_counter_ns())

        go = TurnInput(content=(TextPart(text="go"),))
        await port.prompt(conversation, go, sink)  # warm-up: the child session is opened
        for _ in range(repeats):
            arrived.clear()
            delivered.clear()
            await port.prompt(conversation, go, sink)
            rate = (len(delivered) - 1) / ((delivered[-1] - arrived[0]) / 1e9)
            if rate > best:
                best = rate
                added = [(d - a) / 1e6 for a, d in zip(arrived, delivered, strict=True)]
        await port.aclose()
    return best, added


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=40000)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--pace-ms", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    text = ("lorem ipsum " * (args.chars // 12 + 1))[: args.chars]
    with tempfile.TemporaryDirectory() as folder:
        flood = write(Path(folder) / "flood.json", {"text": text, "chunk_size": args.chunk})
        paced_text = text[: max(args.chunk, args.chars // 20)]
        paced = write(
            Path(folder) / "paced.json",
            {"text": paced_text, "chunk_size": args.chunk, "delay_ms": args.pace_ms},
        )
        direct_rate = await direct(child(flood), args.repeats)
        bridged_rate, _ = await bridged(child(flood), args.repeats)
        _, added = await bridged(child(paced), args.repeats)
    print(f"flood: one answer of ~{args.chars // args.chunk} text chunks, no pause")
    print(f"  direct:  {direct_rate:10.0f} updates/s (plain ACP client)")
    print(f"  bridged: {bridged_rate:10.0f} events/s at the run's sink", end="")
    print(f"  ({100 * bridged_rate / direct_rate:.0f}% of direct)")
    print(f"paced: {len(added)} chunks {args.pace_ms:g} ms apart")
    print(
        f"  added latency per event: p50 {pct(added, 50):.3f} ms  p99 {pct(added, 99):.3f} ms"
        f"  max {max(added):.3f} ms"
    )


def write(path: Path, round_: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"rounds": [round_], "loop": True}), encoding="utf-8")
    return path


if __name__ == "__main__":
    anyio.run(main)
