"""The AG-UI bridge's cost: events/s and added latency per event, bridged vs direct.

An AG-UI endpoint (Starlette + uvicorn on 127.0.0.1, in this process) streams one run of
TEXT_MESSAGE_CONTENT events, each carrying the wall-clock time it was sent. *Direct*: an
httpx + httpx-sse client reads the run. *Bridged*: a spawned `steerable-bridge acp
--agui-url URL --storage memory` reads it and an ACP SDK client reads the
`agent_message_chunk`s it sends — the path an editor sees, so the bridge's mapping, the
session log, the ACP renderer and the stdio framing are all in it. Two measurements:

- throughput: N events as fast as the server can send them (`/fast`); events/s from the
  request to the last event, for both paths (target: bridged ≥ 50 % of direct);
- latency: M events paced 2 ms apart (`/paced`, below either path's capacity, so queueing
  does not dominate); per-event latency = arrival - send time; the added latency is the
  bridged percentile minus the direct one (target: < 1 ms at p99).

Run under the shared lock: `flock /work/wt/heavy.lock uv run python bench/bridge_agui.py
[N] [M]` (defaults 3000 and 500). Loopback only; every wait bounded.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import uvicorn
from acp import schema as acp
from acp import spawn_agent_process
from ag_ui.core import (
    Event,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder
from httpx_sse import aconnect_sse
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

ENCODER = EventEncoder()
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
PACE_S = 0.002


def _stream(body: dict[str, Any], count: int, pace: float) -> AsyncIterator[str]:
    async def frames() -> AsyncIterator[str]:
        thread, run = body["threadId"], body["runId"]
        yield ENCODER.encode(RunStartedEvent(thread_id=thread, run_id=run))
        yield ENCODER.encode(TextMessageStartEvent(message_id="m", role="assistant"))
        for _ in range(count):
            stamp = f"{time.time_ns()};"
            yield ENCODER.encode(TextMessageContentEvent(message_id="m", delta=stamp))
            if pace:
                await anyio.sleep(pace)
        yield ENCODER.encode(TextMessageEndEvent(message_id="m"))
        yield ENCODER.encode(RunFinishedEvent(thread_id=thread, run_id=run))

    return frames()


def app(fast: int, paced: int) -> Starlette:
    async def run_fast(request: Request) -> StreamingResponse:
        return StreamingResponse(
            _stream(await request.json(), fast, 0), media_type="text/event-stream"
        )

    async def run_paced(request: Request) -> StreamingResponse:
        return StreamingResponse(
            _stream(await request.json(), paced, PACE_S), media_type="text/event-stream"
        )

    return Starlette(
        routes=[
            Route("/fast", run_fast, methods=["POST"]),
            Route("/paced", run_paced, methods=["POST"]),
        ]
    )


class Arrivals:
    """Per-event latencies (ns) and the time of the last arrival."""

    def __init__(self) -> None:
        self.latencies: list[int] = []
        self.last = 0.0

    def take(self, text: str) -> None:
        now = time.time_ns()
        for stamp in text.split(";"):
            if stamp:
                self.latencies.append(now - int(stamp))
        self.last = time.perf_counter()


async def direct(url: str) -> tuple[Arrivals, float]:
    arrivals = Arrivals()
    body = {"threadId": "t", "runId": "r", "messages": []}
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()
        async with aconnect_sse(client, "POST", url, json=body) as source:
            async for sse in source.aiter_sse():
                event = EVENTS.validate_json(sse.data)  # as an AG-UI client validates
                if isinstance(event, TextMessageContentEvent):
                    arrivals.take(event.delta)
    return arrivals, start


class Editor:
    def __init__(self) -> None:
        self.arrivals = Arrivals()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentMessageChunk):
            self.arrivals.take(update.content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))


def cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BRIDGE_CPU: list[float] = []
"""CPU seconds the bridge process spent on each timed run."""


async def bridged(url: str) -> tuple[Arrivals, float]:
    editor = Editor()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    command = [sys.executable, "-m", "steerable_bridge.cli", "acp", "--agui-url", url]
    async with spawn_agent_process(
        editor,  # type: ignore[arg-type]
        *command,
        "--storage",
        "memory",
        env=env,
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, process):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        block = acp.TextContentBlock(type="text", text="go")
        await conn.prompt(session_id=session.session_id, prompt=[block])  # warm-up
        editor.arrivals = Arrivals()
        used = cpu_s(process.pid)
        start = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[block])
        BRIDGE_CPU.append(cpu_s(process.pid) - used)
        await anyio.sleep(0.2)  # notifications sent before the response are all read
    return editor.arrivals, start


def pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


def serve(fast: int, paced: int) -> None:
    """The endpoint, in a process of its own so it never competes with the clients."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app(fast, paced), log_level="warning"))
    server.run(sockets=[sock])


async def main(fast: int, paced: int) -> None:
    child = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything runs
        [sys.executable, __file__, "serve", str(fast), str(paced)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        base = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        with anyio.fail_after(300):
            for _ in range(200):  # listening a moment after the port is printed
                try:
                    await direct(f"{base}/paced")
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
            await direct(f"{base}/fast")  # warm-up
            rates: dict[str, float] = {}
            lat: dict[str, list[int]] = {}
            client_cpu: dict[str, float] = {}
            for name, path in (("direct", direct), ("bridged", bridged)):
                used = time.process_time()
                arrivals, start = await path(f"{base}/fast")
                client_cpu[name] = (time.process_time() - used) / fast * 1e6
                assert len(arrivals.latencies) == fast, (name, len(arrivals.latencies))
                rates[name] = fast / (arrivals.last - start)
                arrivals, _ = await path(f"{base}/paced")
                assert len(arrivals.latencies) == paced, (name, len(arrivals.latencies))
                lat[name] = arrivals.latencies
    finally:
        child.terminate()
        child.wait(timeout=10)
    print(
        f"throughput ({fast} events):  direct {rates['direct']:,.0f}/s   bridged"
        f" {rates['bridged']:,.0f}/s   ratio {rates['bridged'] / rates['direct']:.0%}"
        " (target >= 50%)"
    )
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        d, b = pct(lat["direct"], q), pct(lat["bridged"], q)
        print(
            f"latency {label} ({paced} events, {PACE_S * 1000:g} ms apart): direct {d:.3f} ms"
            f"   bridged {b:.3f} ms   added {b - d:.3f} ms"
            + ("   (target < 1 ms)" if q > 0.9 else "")
        )
    print(
        f"latency mean: direct {statistics.mean(lat['direct']) / 1e6:.3f} ms   bridged"
        f" {statistics.mean(lat['bridged']) / 1e6:.3f} ms"
    )
    print(
        f"client CPU per event: direct (httpx-sse + ag_ui models) {client_cpu['direct']:.0f} us"
        f"   bridged (ACP SDK client) {client_cpu['bridged']:.0f} us"
    )
    per_event = BRIDGE_CPU[0] / fast * 1e6
    print(
        f"bridge process CPU: {per_event:.0f} us per event over the {fast}-event run (at most"
        f" {1e6 / per_event:,.0f} events/s on one idle core)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
        m = int(sys.argv[2]) if len(sys.argv) > 2 else 500
        anyio.run(main, n, m)
