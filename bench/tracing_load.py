"""Tracing overhead on the AG-UI load benchmark itself, in alternating rounds.

Runs `agui_concurrency.py` (the AG-UI load benchmark: one `serve` process, many concurrent
runs over loopback) `--rounds` times without tracing and `--rounds` times with `--otel`
(OTLP/HTTP to a local sink, 100 % sampling), alternating off/on and on/off so both see the
same machine, each round a fresh server and the same arguments. Prints every round's
events/s and server CPU per run, the medians of each mode, and the median of the paired
ratios (each round's on against the off run next to it), which cancels most of the drift
a shared machine has from minute to minute. Arguments after `--` go to
`agui_concurrency.py` unchanged (default: `--runs 2000 --concurrency 100 --model-http 20
--server-cpus 0`, the benchmark's load with its server pinned to CPU 0, long enough that
the span exporter sends several batches inside the measured window).
Run: `uv run python bench/tracing_load.py [--rounds 6] [-- agui_concurrency.py args]`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

DEFAULT = ["--runs", "2000", "--concurrency", "100", "--model-http", "20", "--server-cpus", "0"]


def one_round(args: list[str], otel: bool) -> tuple[float, float]:
    """(events/s, server CPU ms per run) of one `agui_concurrency.py` run."""
    script = str(Path(__file__).with_name("agui_concurrency.py"))
    command = [sys.executable, script, *args, *(["--otel"] if otel else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    out = done.stdout
    errors = re.search(r"^errors: (\d+)", out, re.MULTILINE)
    rate = re.search(r"([\d,]+) events/s", out)
    cpu = re.search(r"server CPU per run: ([\d.]+) ms", out)
    if done.returncode or not (errors and rate and cpu):
        raise SystemExit(f"agui_concurrency.py failed:\n{out}\n{done.stderr[-2000:]}")
    if int(errors.group(1)):
        raise SystemExit(f"runs failed, figures not comparable:\n{out}")
    return float(rate.group(1).replace(",", "")), float(cpu.group(1))


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds per mode (6)")
    args = parser.parse_args(argv[:split])
    load = argv[split + 1 :] or DEFAULT
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for index in range(args.rounds):
        for otel in (False, True) if index % 2 == 0 else (True, False):
            rows[otel].append(one_round(load, otel))
            rate, cpu = rows[otel][-1]
            print(f"round {index + 1} tracing {'on ' if otel else 'off'}: {rate:,.0f} events/s,"
                  f" server CPU {cpu:.2f} ms per run", flush=True)  # fmt: skip
    print(f"AG-UI load benchmark: agui_concurrency.py {' '.join(load)}, {args.rounds} rounds each")
    off, on = rows[False], rows[True]
    for label, got in (("off", off), ("on", on)):
        print(
            f"tracing {label:>3}: median {statistics.median(r[0] for r in got):,.0f} events/s,"
            f" {statistics.median(r[1] for r in got):.2f} ms server CPU per run"
        )
    rates = sorted(b[0] / a[0] for a, b in zip(off, on, strict=True))
    cpus = sorted(b[1] / a[1] for a, b in zip(off, on, strict=True))
    print(
        "paired rounds, on/off events/s: "
        + ", ".join(f"{r:.3f}" for r in rates)
        + f"; median {(statistics.median(rates) - 1) * 100:+.1f} % events/s,"
        f" {(statistics.median(cpus) - 1) * 100:+.1f} % server CPU per run"
    )


if __name__ == "__main__":
    main()
