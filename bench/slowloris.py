"""`serve` under request-head abuse: 300 slowloris connections at a 256-fd limit, then 40 MB heads.

Starts the real `steerable-bridge serve` (demo model, memory storage) with RLIMIT_NOFILE 256,
then, on loopback only and bounded in time:

1. **slowloris**: keeps `--connections` (300) connections open, each sending a request head
   one header line every few seconds and never finishing it; every connection the server
   drops is opened again at once. Meanwhile a probe asks `GET /health` on a new connection
   every 0.5 s (2 s timeout). Printed: probe availability (answered 200 in time), p50 / p99
   latency, how often the server dropped an attacking connection and with what status.
2. **big heads**: `--heads` (5) connections at once each try to send a 40 MB header; printed:
   the status each got and the serve process's RSS before, at its peak and after.

    uv run python bench/slowloris.py [--seconds 60] [--connections 300] [--fd-limit 256]

Run it alone (`flock /work/wt/heavy.lock ...` on a shared machine): the figures are latencies.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter

import anyio
from anyio.abc import SocketStream

HEAD_START = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
PROBE_TIMEOUT_S = 2.0


def start_serve(
    fd_limit: int, extra: list[str], log: str | None
) -> tuple[subprocess.Popen[str], str, int]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    errors = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    process = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", "0",
         "--storage", "memory", "--log-level", "error", *extra],
        stdout=subprocess.PIPE, stderr=errors,
        env=env, text=True,
        preexec_fn=limit,
    )  # fmt: skip
    os.close(errors)  # the child has its own copy
    assert process.stdout is not None
    url = process.stdout.readline().split()[-1]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    return process, "127.0.0.1", port


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def health(host: str, port: int) -> float | None:
    """Seconds `GET /health` took on a new connection, or None (no 200 within 2 s)."""
    started = time.perf_counter()
    with anyio.move_on_after(PROBE_TIMEOUT_S):
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            return None
        async with stream:
            await stream.send(HEAD_START + b"Connection: close\r\n\r\n")
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass
            if data.startswith(b"HTTP/1.1 200"):
                return time.perf_counter() - started
            return None
    return None


async def wait_healthy(host: str, port: int) -> None:
    for _ in range(200):
        if await health(host, port) is not None:
            return
        await anyio.sleep(0.05)
    raise SystemExit("serve did not answer /health")


async def slowloris(
    host: str, port: int, count: int, seconds: float
) -> tuple[list[float | None], Counter[str]]:
    dropped: Counter[str] = Counter()
    probes: list[float | None] = []

    async def attacker() -> None:
        while True:
            try:
                stream = await anyio.connect_tcp(host, port)
            except OSError:
                dropped["connect failed"] += 1
                await anyio.sleep(0.1)
                continue
            await hold(stream)

    async def hold(stream: SocketStream) -> None:
        async with stream:
            try:
                await stream.send(HEAD_START)
                async with anyio.create_task_group() as group:

                    async def trickle() -> None:
                        n = 0
                        while True:
                            await anyio.sleep(3)
                            await stream.send(b"X-%d: a\r\n" % n)
                            n += 1

                    group.start_soon(trickle)
                    answer = await stream.receive()
                    dropped[answer.split(b"\r\n", 1)[0].decode(errors="replace")] += 1
                    group.cancel_scope.cancel()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                dropped["closed without an answer"] += 1

    async def probe() -> None:
        while True:
            probes.append(await health(host, port))
            await anyio.sleep(0.5)

    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(attacker)
            await anyio.sleep(1)  # the flood is in place before the first probe
            group.start_soon(probe)
    return probes, dropped


async def big_heads(host: str, port: int, heads: int, size: int, pid: int) -> None:
    before = rss_kib(pid)
    peak = before
    statuses: list[str] = []
    done = anyio.Event()

    async def one() -> None:
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            statuses.append("connect failed")
            return
        async with stream:
            answer = b""
            try:
                await stream.send(HEAD_START + b"X-Big: ")
                block = b"a" * 65536
                for _ in range(size // len(block)):
                    await stream.send(block)
                await stream.send(b"\r\n\r\n")
            except (anyio.BrokenResourceError, OSError):
                pass
            try:
                with anyio.fail_after(10):
                    answer = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError, TimeoutError):
                pass
            statuses.append(answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed")

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kib(pid))
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as outer:
        outer.start_soon(sample)
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for _ in range(heads):
                    group.start_soon(one)
        done.set()
    await anyio.sleep(1)
    after = rss_kib(pid)
    print(f"big heads: {heads} x {size / 1e6:.0f} MB header at once -> {Counter(statuses)}")
    print(
        f"serve RSS: before {before / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB"
        f" (+{(peak - before) / 1024:.1f}), after {after / 1024:.1f} MiB"
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.connections + 200
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))
    process, host, port = start_serve(args.fd_limit, args.serve_arg, args.serve_log)
    try:
        await wait_healthy(host, port)
        print(
            f"serve pid {process.pid}, RLIMIT_NOFILE {args.fd_limit},"
            f" {args.connections} slowloris connections for {args.seconds:g} s"
        )
        probes, dropped = await slowloris(host, port, args.connections, args.seconds)
        answered = [p for p in probes if p is not None]
        share = 100 * len(answered) / max(1, len(probes))
        print(f"/health: {len(answered)}/{len(probes)} probes answered ({share:.1f} %)")
        if answered:
            print(
                f"/health latency: p50 {statistics.median(answered) * 1000:.1f} ms,"
                f" p99 {percentile(answered, 0.99) * 1000:.1f} ms,"
                f" max {max(answered) * 1000:.1f} ms"
            )
        print(f"attacking connections ended by the server: {dict(dropped)}")
        await big_heads(host, port, args.heads, args.head_mb * 1_000_000, process.pid)
        print(f"/health afterwards: {'ok' if await health(host, port) else 'FAILED'}")
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--fd-limit", type=int, default=256)
    parser.add_argument("--heads", type=int, default=5)
    parser.add_argument("--head-mb", type=int, default=40)
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="extra option for serve (repeatable)"
    )
    parser.add_argument("--serve-log", help="write serve's stderr (errors) to this file")
    options = parser.parse_args()
    anyio.run(main, options)
