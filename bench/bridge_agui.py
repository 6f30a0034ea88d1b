"""The AG-UI bridge's cost: events/s and added latency per event, bridged vs direct.

An AG-UI endpoint (Starlette + uvicorn on 127.0.0.1, in a process of its own) streams one
run of TEXT_MESSAGE_CONTENT events, each carrying the wall-clock time it was sent. Three
readers of the same endpoint:

- *direct*: an httpx + httpx-sse client validating each event with the `ag_ui` models, as
  an AG-UI client does;
- *bridged, SDK client*: a spawned `steerable-bridge acp --agui-url URL --storage memory`
  reads the run and an ACP SDK client (`spawn_agent_process`) reads its
  `agent_message_chunk`s — the path an editor sees, the reader's own cost included (the
  SDK validates every notification into models and runs a task per message);
- *bridged, lean reader*: the same bridge process, read by a raw line reader of its stdout
  that stamps each line's arrival and only parses the chunks (requests are the SDK's
  models, dumped). The bridge is the real process with its log, mapping, ACP renderer and
  stdio framing; only the reader's own cost is left out, so this is the bridge's figure.

Two measurements per reader: throughput — N events as fast as the server sends them
(`/fast`), events/s from the request to the last event (target: bridged >= 50 % of
direct); latency — M events paced 2 ms apart (`/paced`, below every path's capacity, so
queueing does not dominate), per-event latency = arrival - send time, and the added latency
is the bridged percentile minus the direct one of the same round (target: < 1 ms at p99).
Rounds alternate the readers (direct, SDK, lean, ...) so load on a shared machine hits them
alike; figures are medians over the rounds with [min - max]. The bridge's CPU per event is
read from /proc around the timed prompt.

Why the bridge's text chunks skip the SDK models (`transports/acp/wire.py`): through them a
chunk cost a validated update model, a validated `SessionNotification` and a `model_dump`,
about 13 µs an event, most of what the ACP side spent on one; building the same dict
directly (`chunk_params`, byte-identical frames), together with encoding frames with
pydantic-core and reading the pipe's backlog once per write, cut the bridge's CPU per event
by about 40 % (commit 97e6639, measured with this script).

Run under the shared lock: `flock /work/wt/heavy.lock uv run python bench/bridge_agui.py
[--fast N] [--paced M] [--rounds R]` (defaults 10000, 500, 5; N large enough for the
/proc CPU clock's 10 ms ticks). Loopback only; every wait
bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
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
from pydantic import BaseModel, TypeAdapter
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


def bridge_command(url: str) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    command = [sys.executable, "-m", "steerable_bridge.cli", "acp", "--agui-url", url]
    return [*command, "--storage", "memory"], env


class Run:
    """One timed read: its arrivals, when the request went out, and the CPU seconds the
    reader (this process) and the bridge spent on it."""

    def __init__(
        self, arrivals: Arrivals, start: float, reader_cpu_s: float, bridge_cpu_s: float = 0.0
    ) -> None:
        self.arrivals = arrivals
        self.start = start
        self.reader_cpu_s = reader_cpu_s
        self.bridge_cpu_s = bridge_cpu_s


async def direct(url: str) -> Run:
    used = time.process_time()
    arrivals, start = await _direct(url)
    return Run(arrivals, start, time.process_time() - used)


async def _direct(url: str) -> tuple[Arrivals, float]:
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


async def sdk(url: str) -> Run:
    """Bridged, read by the ACP SDK's client."""
    editor = Editor()
    command, env = bridge_command(url)
    async with spawn_agent_process(
        editor,  # type: ignore[arg-type]
        *command,
        env=env,
        transport_kwargs={"stderr": subprocess.DEVNULL, "limit": 64 * 1024 * 1024},
    ) as (conn, process):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        block = acp.TextContentBlock(type="text", text="go")
        await conn.prompt(session_id=session.session_id, prompt=[block])  # warm-up
        editor.arrivals = Arrivals()
        used, read = cpu_s(process.pid), time.process_time()
        start = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[block])
        spent = cpu_s(process.pid) - used
        await anyio.sleep(0.2)  # notifications sent before the response are all read
        reading = time.process_time() - read
    return Run(editor.arrivals, start, reading, spent)


def _request(request_id: int, method: str, params: BaseModel) -> bytes:
    body = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}
    return (json.dumps(frame) + "\n").encode()


class LeanReader:
    """Reads the bridge's stdout line by line, stamping each line as it arrives."""

    def __init__(self, stdout: asyncio.StreamReader) -> None:
        self.stdout = stdout
        self.arrivals = Arrivals()

    async def until(self, request_id: int) -> dict[str, Any]:
        """Read up to the answer to `request_id`, taking the text chunks on the way."""
        while True:
            line = await self.stdout.readline()
            if not line:
                raise RuntimeError("the bridge closed its stdout")
            if b'"agent_message_chunk"' in line:
                self.arrivals.take(json.loads(line)["params"]["update"]["content"]["text"])
                continue
            frame: dict[str, Any] = json.loads(line)
            if frame.get("id") == request_id and "method" not in frame:
                return frame


async def lean(url: str) -> Run:
    """Bridged, read by a raw line reader of the bridge's stdout."""
    command, env = bridge_command(url)
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        limit=64 * 1024 * 1024,
    )
    assert process.stdin is not None and process.stdout is not None
    reader = LeanReader(process.stdout)
    try:
        process.stdin.write(_request(0, "initialize", acp.InitializeRequest(protocol_version=1)))
        await reader.until(0)
        new = acp.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
        process.stdin.write(_request(1, "session/new", new))
        session_id = (await reader.until(1))["result"]["sessionId"]
        block = acp.TextContentBlock(type="text", text="go")
        ask = acp.PromptRequest(session_id=session_id, prompt=[block])
        process.stdin.write(_request(2, "session/prompt", ask))
        await reader.until(2)  # warm-up
        reader.arrivals = Arrivals()
        used, read = cpu_s(process.pid), time.process_time()
        start = time.perf_counter()
        process.stdin.write(_request(3, "session/prompt", ask))
        await reader.until(3)
        spent = cpu_s(process.pid) - used
        reading = time.process_time() - read
    finally:
        process.stdin.close()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Run(reader.arrivals, start, reading, spent)


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


READERS: dict[str, Callable[[str], Awaitable[Run]]] = {
    "direct": direct,
    "sdk": sdk,
    "lean": lean,
}
LABELS = {
    "direct": "direct (AG-UI client)",
    "sdk": "bridged, ACP SDK client",
    "lean": "bridged, lean reader",
}


def spread(values: list[float], fmt: str) -> str:
    return (
        f"{format(statistics.median(values), fmt)}"
        f" [{format(min(values), fmt)} - {format(max(values), fmt)}]"
    )


async def main(fast: int, paced: int, rounds: int) -> None:
    child = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything runs
        [sys.executable, __file__, "serve", str(fast), str(paced)],
        stdout=subprocess.PIPE,
        text=True,
    )
    rate: dict[str, list[float]] = {name: [] for name in READERS}
    ratio: dict[str, list[float]] = {"sdk": [], "lean": []}
    added: dict[tuple[str, float], list[float]] = {}
    absolute: dict[tuple[str, float], list[float]] = {}
    cpu: dict[str, list[float]] = {"sdk": [], "lean": []}
    client_cpu: dict[str, list[float]] = {name: [] for name in READERS}
    try:
        assert child.stdout is not None
        base = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        with anyio.fail_after(120 + 60 * rounds):
            for _ in range(200):  # listening a moment after the port is printed
                try:
                    await _direct(f"{base}/paced")
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
            await _direct(f"{base}/fast")  # warm-up
            for _ in range(rounds):
                fast_rate: dict[str, float] = {}
                for name, read in READERS.items():
                    run = await read(f"{base}/fast")
                    client_cpu[name].append(run.reader_cpu_s / fast * 1e6)
                    got = len(run.arrivals.latencies)
                    assert got == fast, (name, got)
                    fast_rate[name] = fast / (run.arrivals.last - run.start)
                    rate[name].append(fast_rate[name])
                    if name in cpu:
                        cpu[name].append(run.bridge_cpu_s / fast * 1e6)
                for name in ratio:
                    ratio[name].append(fast_rate[name] / fast_rate["direct"])
                quantiles: dict[str, dict[float, float]] = {}
                for name, read in READERS.items():
                    run = await read(f"{base}/paced")
                    got = len(run.arrivals.latencies)
                    assert got == paced, (name, got)
                    quantiles[name] = {q: pct(run.arrivals.latencies, q) for q in (0.5, 0.99)}
                for q in (0.5, 0.99):
                    for name in READERS:
                        absolute.setdefault((name, q), []).append(quantiles[name][q])
                    for name in ratio:
                        gap = quantiles[name][q] - quantiles["direct"][q]
                        added.setdefault((name, q), []).append(gap)
    finally:
        child.terminate()
        child.wait(timeout=10)
    print(f"{rounds} rounds; median [min - max]")
    print(f"throughput ({fast} events, events/s):")
    for name in READERS:
        line = f"  {LABELS[name]:<26} {spread(rate[name], ',.0f')}"
        if name in ratio:
            line += f"   ratio {spread([100 * r for r in ratio[name]], '.0f')} %"
        print(line + ("   (target >= 50 %)" if name == "lean" else ""))
    print(f"latency ({paced} events, {PACE_S * 1000:g} ms apart), ms:")
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        print(f"  {label} direct {spread(absolute[('direct', q)], '.3f')}")
        for name in ratio:
            print(
                f"  {label} {LABELS[name]:<26} {spread(absolute[(name, q)], '.3f')}"
                f"   added {spread(added[(name, q)], '.3f')}"
                + ("   (target < 1 ms)" if q > 0.9 else "")
            )
    print("reader CPU per event over the fast run (us, this process):")
    for name in READERS:
        print(f"  {LABELS[name]:<26} {spread(client_cpu[name], '.0f')}")
    print("bridge process CPU per event over the fast run (us):")
    for name in cpu:
        print(f"  read by {name:<4} {spread(cpu[name], '.1f')}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--fast", type=int, default=10000)
        parser.add_argument("--paced", type=int, default=500)
        parser.add_argument("--rounds", type=int, default=5)
        args = parser.parse_args()
        anyio.run(main, args.fast, args.paced, args.rounds)
