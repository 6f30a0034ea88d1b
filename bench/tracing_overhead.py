"""Tracing overhead at its worst: `serve` CPU-bound on an instant model, tracing off and on.

Starts `steerable-bridge serve` (scripted model: a reply streamed in 4-character pieces, a
`calculate` tool call every other model call; in-memory storage) once per mode and drives the
same load through it: `--runs` runs, `--concurrency` at a time, each on its own loopback
connection. Modes: `off` (no OTEL_* variables: OpenTelemetry is not even imported) and `on`
(`OTEL_EXPORTER_OTLP_ENDPOINT` pointed at a local OTLP/HTTP sink in this process that
accepts and discards the batches, `OTEL_TRACES_SAMPLER=always_on`). The modes alternate for
`--rounds` rounds (off, on, off, on, ...) so both see the same machine load; for each mode
it prints the best events/s (SSE events received per second of wall time), the server's CPU
time per 1,000 events, and for `on` how many spans the sink received. The overhead figure
compares the best rounds, and the median rounds (steadier on a loaded machine). Bounded:
each run by `--timeout`, each server start by 30 s. `--delay-ms` paces the model (0: the
server is CPU-bound, the worst case for tracing); `--src DIR` runs the server from another
checkout (PYTHONPATH), to compare builds. Six spans cost a run here only ~1.9 ms of server
CPU, so this is where tracing weighs most; `tracing_load.py` measures it on the AG-UI load
benchmark itself, `tracing_instructions.py` counts it in instructions.
Run: `uv run python bench/tracing_overhead.py [--runs 400] [--concurrency 20] [--rounds 3]
[--delay-ms 0]`.
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
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx

TEXT = "Hello from the scripted model, streamed in small pieces so a run has many events."
CALL = {"id": "c1", "name": "calculate", "arguments": {"expression": "6 * 7"}}


class Sink:
    """An OTLP/HTTP receiver that answers 200 and counts what it got (spans, roughly)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                sink.requests += 1
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def env(self) -> dict[str, str]:
        """The variables that make a server trace every run (100 % sampling) to this sink."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.url,
            "OTEL_TRACES_SAMPLER": "always_on",
            "OTEL_SERVICE_NAME": "bench",
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def wait_until_healthy(port: int, server: subprocess.Popen[bytes], seconds: float) -> None:
    """Poll `GET /health` until it answers 200; exit if `server` ends or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit(f"the server did not start within {seconds:g} s")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_run(port: int, index: int, limit_s: float) -> int:
    """One run over a raw loopback socket; returns the SSE events received (raises on error)."""
    body = json.dumps(
        {
            "threadId": f"bench-{index}",
            "runId": f"run-{index}",
            "messages": [{"id": f"u-{index}", "role": "user", "content": "hello"}],
        }
    ).encode()
    request = (
        f"POST /agent HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    data = b""
    with anyio.fail_after(limit_s):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request)
            while chunk := await reader.read(65536):
                data += chunk
        finally:
            writer.close()
    if not data.startswith(b"HTTP/1.1 200") or b'"type":"RUN_FINISHED"' not in data:
        raise RuntimeError("a run failed: " + data[-200:].decode(errors="replace"))
    return data.count(b"\ndata: ") + data.count(b"\r\n\r\ndata: ")


async def drive(port: int, runs: int, concurrency: int, limit_s: float) -> tuple[int, float]:
    for i in range(10):  # warm up, not measured
        await one_run(port, -1 - i, limit_s)
    counts: list[int] = []
    limiter = anyio.Semaphore(concurrency)

    async def task(i: int) -> None:
        async with limiter:
            counts.append(await one_run(port, i, limit_s))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(task, i)
    return sum(counts), time.perf_counter() - started


def measure(mode: str, args: argparse.Namespace, script: Path, sink: Sink) -> tuple[float, float]:
    """(events/s, server CPU ms per 1,000 events) of one round in `mode`."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STEERABLE_"))}
    if args.src:
        env["PYTHONPATH"] = args.src
    if mode == "on":
        env.update(sink.env())
    command = [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", str(port)]
    command += ["--model", f"scripted:{script}", "--storage", "memory", "--log-level", "error"]
    quiet = subprocess.DEVNULL
    server = subprocess.Popen(  # cwd: not this checkout, or it would shadow --src
        command, env=env, cwd=script.parent, stdout=quiet, stderr=quiet
    )
    try:
        wait_until_healthy(port, server, 30)
        before = cpu_seconds(server.pid)
        events, wall = anyio.run(drive, port, args.runs, args.concurrency, args.timeout)
        cpu = cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    return events / wall, cpu * 1000 / events * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="per run, seconds")
    parser.add_argument(
        "--delay-ms", type=int, default=0, help="scripted model's pause between chunks (0)"
    )
    parser.add_argument("--src", default="", help="run the server from this checkout")
    args = parser.parse_args()
    sink = Sink()
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "script.json"
            rounds = [
                {"text": TEXT, "chunk_size": 4, "delay_ms": args.delay_ms, "tool_calls": [CALL]},
                {"text": TEXT, "chunk_size": 4, "delay_ms": args.delay_ms},
            ]
            script.write_text(json.dumps({"rounds": rounds, "loop": True}))
            for _ in range(args.rounds):
                for mode in ("off", "on"):
                    results[mode].append(measure(mode, args, script, sink))
    finally:
        sink.close()
    print(
        f"{args.runs} runs per round, {args.concurrency} at a time, {args.rounds} rounds per"
        " mode, one serve process per round, loopback, scripted model with a tool call,"
        f" {args.delay_ms} ms between chunks" + (f", server from {args.src}" if args.src else "")
    )
    best, middle = {}, {}
    for mode, rows in results.items():
        rate = max(r[0] for r in rows)
        cpu = min(r[1] for r in rows)
        best[mode] = (rate, cpu)
        middle[mode] = (
            statistics.median(r[0] for r in rows),
            statistics.median(r[1] for r in rows),
        )
        each = ", ".join(f"{r[0]:,.0f}" for r in rows)
        print(
            f"tracing {mode:>3}: best {rate:,.0f} events/s (rounds: {each});"
            f" server CPU {cpu:.1f} ms per 1,000 events"
        )
    print(f"OTLP sink received {sink.requests} export requests, {sink.bytes:,} bytes")
    for label, figures in (("best rounds", best), ("median rounds", middle)):
        drop = (1 - figures["on"][0] / figures["off"][0]) * 100
        extra = (figures["on"][1] / figures["off"][1] - 1) * 100
        print(
            f"overhead at 100 % sampling ({label}): {-drop:+.1f} % events/s,"
            f" {extra:+.1f} % CPU per event"
        )


if __name__ == "__main__":
    main()
