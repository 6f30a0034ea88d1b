"""Tracing's cost counted in instructions: `serve` under callgrind, tracing off and on.

Wall-clock figures on a shared 2-core machine move by 5-10 % from one round to the next,
more than tracing costs, so a few rounds of `agui_concurrency.py --otel` cannot tell 2 %
from 6 %. Instruction counts barely move. This starts `steerable-bridge serve` the way the
AG-UI load benchmark does (`openai:bench` over HTTP from `openai_server.py`, 20 one-token
chunks a call, in-memory storage) under `valgrind --tool=callgrind`, counting nothing until
ten warm-up runs are done, then drives runs one at a time and stops the server (which
exports the spans it still holds). It does so for `--small` and for `--large` runs, each
in a fresh server, tracing off and on (OTLP/HTTP to a sink in this process, 100 %
sampling), and prints the instructions a run costs (the difference between the two
counts over the runs between them, so start-up and shutdown cancel out): on the event
loop's thread, on the other threads (the span exporter's), and in all. Tracing's share is
the extra instructions a run costs with it on. `OTEL_BSP_SCHEDULE_DELAY` is ten minutes in
both runs: under callgrind a run takes ~50 times longer, so the 5 s timer would fire every
few runs and pay an HTTP POST for a handful of spans; with it, a batch leaves when 512
spans are queued, as it does at full load. `PYTHONHASHSEED` is fixed, so dicts probe alike
in every server (without it the counts of two servers differ by ~1 %). The figure leaves
out what instructions do not show (cache misses, the GIL passing between threads): the
wall-clock benchmarks measure those. Run it alone on the machine: the event loop's count
includes its timers (the session's commit flusher, idle sweeps), which fire more often per
run when valgrind is starved of CPU, so two copies at once move it by ±1-2 %; the
exporter's count does not move. Takes a few minutes.
`--scripted` counts `tracing_overhead.py`'s worst case instead (an instant scripted model,
a tool call every other call: six spans in a run that costs the server little).
Run: `uv run python bench/tracing_instructions.py [--small 40] [--large 200] [--scripted]
[--src DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from agui_concurrency import free_port, one_run
from tracing_overhead import CALL, TEXT, Sink, wait_until_healthy


def thread_totals(prefix: Path) -> list[int]:
    """Instructions per thread (callgrind writes one file a thread: PREFIX-01, -02, ...)."""
    totals = []
    for part in sorted(prefix.parent.glob(prefix.name + "-*")):
        for line in part.read_text().splitlines():
            if line.startswith("totals:"):
                totals.append(int(line.split()[1]))
    return totals


def count(mode: str, runs: int, args: argparse.Namespace, sink: Sink, tmp: Path) -> list[int]:
    """Instructions per thread of a server that served `runs` measured runs."""
    port, model_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["STEERABLE_BASE_URL"] = f"http://127.0.0.1:{model_port}/v1"
    env["PYTHONHASHSEED"] = "0"  # the same string hashes (dict probes) in every server
    if args.src:
        env["PYTHONPATH"] = args.src
    if mode == "on":
        env.update(sink.env(), OTEL_BSP_SCHEDULE_DELAY="600000")
    if args.scripted:  # tracing_overhead.py's worst case: an instant model, a tool every other call
        script = tmp / "script.json"
        rounds = [
            {"text": TEXT, "chunk_size": 4, "delay_ms": 0, "tool_calls": [CALL]},
            {"text": TEXT, "chunk_size": 4, "delay_ms": 0},
        ]
        script.write_text(json.dumps({"rounds": rounds, "loop": True}))
        route = f"scripted:{script}"
        model = None
    else:
        fake = str(Path(__file__).with_name("openai_server.py"))
        model = subprocess.Popen(
            [sys.executable, fake, "--port", str(model_port), "--tokens", "20"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        route = "openai:bench"
    prefix = tmp / f"callgrind.{mode}.{runs}"
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}",
        "--instr-atstart=no", "--separate-threads=yes",
        sys.executable, "-m", "steerable_bridge.cli", "serve", "--port", str(port),
        "--storage", "memory", "--model", route, "--log-level", "error",
    ]  # fmt: skip
    server = subprocess.Popen(  # cwd: not this checkout, or it would shadow --src
        command, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until_healthy(port, server, 300)  # valgrind starts Python ~50 times slower

        async def drive(first: int, n: int) -> None:
            for i in range(first, first + n):
                result = await one_run(port, i, args.timeout)
                if isinstance(result, str):
                    raise SystemExit(f"a run failed: {result}")

        anyio.run(drive, -10, 10)  # warm up, not counted
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        anyio.run(drive, 0, runs)
        server.send_signal(signal.SIGTERM)  # a stopping server exports what it still holds
        server.wait(timeout=600)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        if model is not None:
            model.terminate()
            model.wait(timeout=10)
    return thread_totals(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=40, help="runs counted in the first server")
    parser.add_argument("--large", type=int, default=200, help="runs counted in the second")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--src", default="", help="run the server from this checkout")
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="tracing_overhead.py's worst case instead: a scripted model that answers at once,"
        " in 4-character pieces, with a tool call every other call (six spans a run)",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed; install it (Debian: apt install valgrind)")
    if args.large <= args.small:
        raise SystemExit("--large must be more runs than --small")
    sink = Sink()
    per_run: dict[str, tuple[float, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            for mode in ("off", "on"):
                small = count(mode, args.small, args, sink, tmp)
                large = count(mode, args.large, args, sink, tmp)
                runs = args.large - args.small
                loop = (large[0] - small[0]) / runs
                rest = (sum(large[1:]) - sum(small[1:])) / runs
                per_run[mode] = (loop, rest)
    finally:
        sink.close()
    model = (
        "scripted model (instant, a tool call every other call)"
        if args.scripted
        else "openai:bench over HTTP (20 tokens)"
    )
    print(
        f"serve under callgrind, {model}, runs one at a time,"
        f" {args.small} vs {args.large} runs counted"
        + (f", server from {args.src}" if args.src else "")
    )
    for mode, (loop, rest) in per_run.items():
        print(
            f"tracing {mode:>3}: {loop + rest:,.0f} instructions per run"
            f" ({loop:,.0f} on the event loop's thread, {rest:,.0f} on the others)"
        )
    off, on = per_run["off"], per_run["on"]
    extra_loop, extra_rest = on[0] - off[0], on[1] - off[1]
    base = off[0] + off[1]
    print(
        f"tracing at 100 % sampling adds {extra_loop + extra_rest:,.0f} instructions per run"
        f" ({(extra_loop + extra_rest) / base * 100:+.1f} %): {extra_loop:,.0f} on the event"
        f" loop's thread ({extra_loop / base * 100:+.1f} %), {extra_rest:,.0f} on the exporter's"
        f" ({extra_rest / base * 100:+.1f} %)"
    )
    print(f"OTLP sink received {sink.requests} export requests")


if __name__ == "__main__":
    main()
