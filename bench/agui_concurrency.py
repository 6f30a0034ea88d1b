"""1,000 concurrent AG-UI runs against one `steerable-bridge serve` process (loopback).

Starts the server as a child process on a scripted model (a short streamed reply, so the
figures measure the transport, not a model) and in-memory storage, waits for /health,
warms up with 10 sequential runs, then opens N concurrent `POST /agent` streams, each on its
own thread and its own loopback connection (raw sockets: an httpx client would be the
bottleneck). Per run it records the time from sending the request to the first SSE event
and to the end of the stream; a run is an error unless it answers 200 and ends with
RUN_FINISHED without RUN_ERROR. Prints errors, p50 / p99 / max time to first event, p50 /
p99 time to finish, the wall time, the server's CPU time and its peak RSS (VmHWM). Every
wait is bounded: each run by `--timeout`, the server start by 30 s. The client shares the
machine with the server, so on 2 cores both compete for the CPU.
With `--model-http TOKENS` the model is `openai:bench` over HTTP instead: `openai_server.py`
in a process of its own, streaming TOKENS one-token chunks per call, so each run pays for a
real model connection. `--concurrency C` keeps at most C runs in flight (0: all at once),
`--server-cpus 0` pins the server (and its workers) with taskset and, unless
`--others-cpus` says otherwise, keeps this client and the fake model server off those CPUs
(on the rest), so neither takes the measured server's CPU nor pre-empts it when woken; give
`--others-cpus all` for the earlier measure, where they may run anywhere. The client runs
on uvloop (`--client-loop asyncio` for the plain loop it used before), so a busy client
adds less delay of its own to the times it records. `--workers N` passes
`serve --workers N`, `--src DIR` runs the server from another checkout (PYTHONPATH) to
compare builds on the same load, and `--peer PYTHON` measures pydantic-ai's AG-UI adapter
instead (`pydantic_ai_agui.py`, run by a Python that has it). `--otel` turns tracing on in
the server the way an operator would (`OTEL_EXPORTER_OTLP_ENDPOINT` pointed at an OTLP/HTTP
sink in this process that accepts and discards the batches, `OTEL_TRACES_SAMPLER=always_on`);
without it no `OTEL_*` variable reaches the server, so tracing is off. The server's CPU time
counts its worker processes too, and is also printed per run, with the AG-UI events/s
received. `--resume` makes each run, once it ended, resume its stream after its middle
frame (`GET /agent/threads/{id}/events` with `Last-Event-ID`) and check the replay is the
rest of the original byte for byte: the replay path under the same load.
Run: `uv run python bench/agui_concurrency.py [--runs 1000] [--storage PATH]`, e.g.
`... --runs 300 --concurrency 100 --model-http 20 --server-cpus 0`.
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
import time
from pathlib import Path

import anyio
from tracing_overhead import Sink, wait_until_healthy

TEXT = "Hello from the scripted model, streamed in small pieces."


def script(delay_ms: int) -> dict[str, object]:
    return {"rounds": [{"text": TEXT, "chunk_size": 8, "delay_ms": delay_ms}], "loop": True}


OPEN = [0, 0]
"""Streams open now, and the most open at once."""
EVENTS = [0]
"""AG-UI events received by the measured runs."""
RESUME = [False, 0]
"""Whether each run resumes its stream after it ends (`--resume`), and the events replayed."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def one_run(port: int, index: int, limit_s: float) -> tuple[float, float] | str:
    """One run over a raw loopback socket (httpx would make the client the bottleneck)."""
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
    start = time.perf_counter()
    first = None
    data = b""
    try:
        with anyio.fail_after(limit_s):
            # asyncio directly: anyio.connect_tcp resolves even an IP literal in a worker
            # thread, which would serialise 1,000 connects through its thread limiter.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            OPEN[0] += 1
            OPEN[1] = max(OPEN[1], OPEN[0])
            try:
                writer.write(request)
                while chunk := await reader.read(65536):
                    if first is None and b"data: " in chunk:
                        first = time.perf_counter() - start
                    data += chunk
            finally:
                OPEN[0] -= 1
                writer.close()
    except (TimeoutError, OSError) as err:
        return f"{type(err).__name__}: {err}"
    if not data.startswith(b"HTTP/1.1 200"):
        return data.split(b"\r\n", 1)[0].decode(errors="replace") or "no response"
    if b"chunked" in data.split(b"\r\n\r\n", 1)[0].lower():
        head, _, rest = data.partition(b"\r\n\r\n")
        data = head + b"\r\n\r\n" + dechunk(rest)
    if b'"type":"RUN_FINISHED"' not in data or b'"type":"RUN_ERROR"' in data or first is None:
        return "the stream did not end with RUN_FINISHED: " + data[-200:].decode(errors="replace")
    EVENTS[0] += data.count(b"data: ")
    if RESUME[0]:
        problem = await resume_half(port, index, data, limit_s)
        if problem is not None:
            return problem
    return first, time.perf_counter() - start


async def resume_half(port: int, index: int, data: bytes, limit_s: float) -> str | None:
    """Resume the run's stream after its middle frame (`GET .../events`, Last-Event-ID) and
    check the replay is the rest of the original, byte for byte; None when it is."""
    body = data.split(b"\r\n\r\n", 1)[1]
    frames = [f for f in body.split(b"\n\n") if f.startswith(b"id: ")]
    middle = frames[len(frames) // 2]
    last_id = middle.split(b"\n", 1)[0][4:].decode()
    request = (
        f"GET /agent/threads/bench-{index}/events?protocol=0 HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nLast-Event-ID: {last_id}\r\nConnection: close\r\n\r\n"
    ).encode()
    got = b""
    try:
        with anyio.fail_after(limit_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(request)
                while chunk := await reader.read(65536):
                    got += chunk
            finally:
                writer.close()
    except (TimeoutError, OSError) as err:
        return f"resume: {type(err).__name__}: {err}"
    head, _, replay = got.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        replay = dechunk(replay)
    rest = b"".join(f + b"\n\n" for f in frames[len(frames) // 2 + 1 :])
    if replay != rest:
        return f"resume: the replay differs from the original ({len(replay)} vs {len(rest)} B)"
    RESUME[1] += replay.count(b"data: ")
    return None


def dechunk(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body's content."""
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";", 1)[0], 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2 :]
    return out


async def drive(
    port: int, runs: int, limit_s: float, ramp_s: float = 0.0, concurrency: int = 0
) -> tuple[list[tuple[float, float]], list[str], float]:
    for i in range(10):  # warm up (first-request imports and caches), not measured
        await one_run(port, -1 - i, limit_s)
    results: list[tuple[float, float] | str] = [""] * runs
    started = time.perf_counter()
    slots = anyio.Semaphore(concurrency or runs)

    OPEN[1] = 0
    EVENTS[0] = 0

    async def task(i: int) -> None:
        await anyio.sleep(ramp_s * i / runs)
        async with slots:
            results[i] = await one_run(port, i, limit_s)

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(task, i)
    wall = time.perf_counter() - started
    good = [r for r in results if isinstance(r, tuple)]
    errors = [r for r in results if isinstance(r, str)]
    return good, errors, wall


def cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and of every process below it (workers), live ones only."""
    total = 0.0
    for one in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def other_cpus(server_cpus: str, others: str) -> set[int]:
    """The CPUs for the client and the model server: `others` as a taskset-style list, all
    ("all", or nothing pinned), or by default the CPUs `server_cpus` leaves free."""
    if others == "all" or (not others and not server_cpus):
        return set()
    if others:
        return cpu_list(others)
    free = os.sched_getaffinity(0) - cpu_list(server_cpus)
    return free


def cpu_list(text: str) -> set[int]:
    """A taskset CPU list ("0", "0,2", "1-3") as a set."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=60.0, help="per run, seconds")
    parser.add_argument(
        "--delay-ms", type=int, default=0, help="scripted model's pause between chunks (0)"
    )
    parser.add_argument(
        "--ramp-s", type=float, default=0.0, help="spread the starts over this many seconds (0)"
    )
    parser.add_argument(
        "--storage", default="memory", help="the server's --storage (memory; or a file path)"
    )
    parser.add_argument("--concurrency", type=int, default=0, help="runs in flight (0: all)")
    parser.add_argument(
        "--model-http", type=int, default=0, metavar="TOKENS", help="model over HTTP (0: off)"
    )
    parser.add_argument("--server-cpus", default="", help="taskset CPU list for the server")
    parser.add_argument(
        "--others-cpus",
        default="",
        help="CPUs for this client and the model server (default: those --server-cpus leaves;"
        " 'all': anywhere, the earlier measure)",
    )
    parser.add_argument(
        "--client-loop",
        choices=["uvloop", "asyncio"],
        default="uvloop",
        help="the client's event loop (uvloop; asyncio: the earlier measure)",
    )
    parser.add_argument("--workers", type=int, default=1, help="serve --workers N (1)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="after each run, resume its stream after its middle frame and check the bytes",
    )
    parser.add_argument("--src", default="", help="run the server from this checkout")
    parser.add_argument(
        "--otel", action="store_true", help="trace every run (100 %% sampling) to a local sink"
    )
    parser.add_argument(
        "--peer",
        default="",
        metavar="PYTHON",
        help="measure pydantic-ai's AGUIAdapter instead (pydantic_ai_agui.py run by PYTHON)",
    )
    args = parser.parse_args()
    RESUME[0] = args.resume
    others = other_cpus(args.server_cpus, args.others_cpus)
    if others:
        os.sched_setaffinity(0, others)  # this client, and the model server it starts
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script(args.delay_ms)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["STEERABLE_DEMO_PACE_MS"] = "0"
        env["STEERABLE_MAX_RUNS"] = "0"  # measure the transport, not the run cap
        sink = None
        if args.otel:
            sink = Sink()
            env.update(sink.env())
        if args.src:
            env["PYTHONPATH"] = args.src
        command = [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", str(port)]
        command += ["--storage", args.storage]
        model_server = None
        if args.model_http:
            model_port = free_port()
            fake = str(Path(__file__).with_name("openai_server.py"))
            model_server = subprocess.Popen(
                [sys.executable, fake, "--port", str(model_port), "--tokens", str(args.model_http)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            env["STEERABLE_BASE_URL"] = f"http://127.0.0.1:{model_port}/v1"
            command += ["--model", "openai:bench"]
        else:
            command += ["--model", f"scripted:{path}"]
        if args.workers > 1:
            command += ["--workers", str(args.workers)]
        if args.peer:
            peer = str(Path(__file__).with_name("pydantic_ai_agui.py"))
            command = [args.peer, peer, "--port", str(port)]
        if args.server_cpus:  # taskset gives the server its own CPUs, not the client's
            command = ["taskset", "-c", args.server_cpus, *command]
        server = subprocess.Popen(  # cwd: not this checkout, or it would shadow --src
            command, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_until_healthy(port, server, 30)
            cpu_before = cpu_seconds(server.pid)
            if args.workers > 1:  # /health answers before every worker is up
                time.sleep(3)
            good, errors, wall = anyio.run(
                drive,
                port,
                args.runs,
                args.timeout,
                args.ramp_s,
                args.concurrency,
                backend_options={"use_uvloop": args.client_loop == "uvloop"},
            )
            rss = peak_rss_mb(server.pid)
            cpu = cpu_seconds(server.pid) - cpu_before
        finally:
            if model_server is not None:
                model_server.terminate()
                model_server.wait(timeout=10)
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
            if sink is not None:  # after the server: a stopping server exports what it holds
                sink.close()
    firsts = [g[0] * 1000 for g in good]
    totals = [g[1] * 1000 for g in good]
    model = f"openai:bench over HTTP ({args.model_http} tokens)" if args.model_http else "scripted"
    print(
        f"{args.runs} runs ({args.concurrency or 'all'} at once), {args.workers} server"
        f" process(es){' on CPUs ' + args.server_cpus if args.server_cpus else ''}, client"
        f" ({args.client_loop}) and model server on CPUs"
        f" {','.join(map(str, sorted(others))) if others else 'any'}, loopback,"
        f" {model} model, storage {args.storage}, chunk delay {args.delay_ms} ms, starts over"
        f" {args.ramp_s:g} s, at most {OPEN[1]} streams open at once"
        + (f", server from {args.src}" if args.src else "")
        + (", pydantic-ai AGUIAdapter (peer)" if args.peer else "")
        + (", tracing on (100 % sampling, OTLP/HTTP to a local sink)" if args.otel else "")
    )
    print(f"errors: {len(errors)}" + (f"  (first: {errors[0]})" if errors else ""))
    if firsts:
        p50, p99 = statistics.median(firsts), pct(firsts, 0.99)
        print(f"time to first event: p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {max(firsts):.1f} ms")
        p50, p99 = statistics.median(totals), pct(totals, 0.99)
        print(f"time to RUN_FINISHED: p50 {p50:.1f} ms  p99 {p99:.1f} ms")
    print(f"wall time: {wall:.2f} s   server CPU: {cpu:.2f} s   server peak RSS: {rss:.1f} MB")
    print(f"server CPU per run: {cpu * 1000 / max(1, args.runs):.2f} ms")
    print(f"AG-UI events received: {EVENTS[0]}, {EVENTS[0] / wall:,.0f} events/s")
    if args.resume:
        print(f"events replayed by resumes (each checked byte for byte): {RESUME[1]}")
    if args.otel:
        assert sink is not None
        print(f"OTLP sink received {sink.requests} export requests, {sink.bytes:,} bytes")


if __name__ == "__main__":
    main()
