"""The long fuzz profile: hostile ACP frames and AG-UI bodies against the real processes.

Draws a pool of messages and RunAgentInput bodies with the hypothesis strategies of
tests/fuzz (seeded), then makes `--frames` ACP lines and `--bodies` HTTP requests from
them with `damage` (invalid UTF-8, NaN / Infinity / 1e400, lone surrogates, nesting up to
50,000 deep, truncation, random bytes) under a seeded `random.Random` — drawing every input
through hypothesis would cost more time than the targets. ACP frames go to one
`steerable-bridge acp` in batches of `--batch` (each batch ends with a ping that must be
answered); bodies go to one `steerable-bridge serve` one request at a time. The oracle is
tests/fuzz/targets.py: the process stays up, every answer is strict JSON with an expected
code, no 5xx, no traceback in the log, every request with a valid id answered. Prints
counts, failures and frames/s / bodies/s; exit status 1 on any failure.
Run: `uv run python bench/fuzz.py [--frames 100000] [--bodies 20000] [--seed 11]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fuzz.strategies import CONTENT_TYPES, damage, messages, run_inputs  # noqa: E402
from tests.fuzz.targets import TRACEBACK, AcpTarget, AguiTarget  # noqa: E402


def pool(strategy: st.SearchStrategy[object], size: int, seed: int) -> list[bytes]:
    """`size` JSON texts drawn from `strategy` (seeded, so every run fuzzes the same)."""
    drawn: list[bytes] = []

    @settings(
        max_examples=size,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(strategy, min_size=10, max_size=10))
    def draw(values: list[object]) -> None:
        drawn.extend(json.dumps(v).encode() for v in values)

    random.seed(seed)
    draw()
    return drawn


def fuzz_acp(total: int, batch: int, rng: random.Random, seeds: list[bytes]) -> int:
    failures = 0
    sent = 0
    started = time.perf_counter()
    with AcpTarget() as target:
        while sent < total:
            frames = [damage(rng.choice(seeds), rng) for _ in range(min(batch, total - sent))]
            problems = target.send_batch(frames)
            sent += len(frames)
            if problems:
                failures += len(problems)
                print("ACP FAILURE", problems[:3], frames[:2], file=sys.stderr)
                if target.process.poll() is not None:
                    break
        unanswered = target.unanswered()
        elapsed = time.perf_counter() - started
        log = target.stderr()
        tracebacks = log.count(TRACEBACK)
        alive = target.process.poll() is None
    if tracebacks:
        print(log[log.find(TRACEBACK) - 200 :][:3000], file=sys.stderr)
    failures += len(unanswered) + tracebacks + (0 if alive else 1)
    print(
        f"acp: {sent} frames in {elapsed:.1f} s = {sent / elapsed:,.0f} frames/s;"
        f" {target.lines} answer lines; unanswered {len(unanswered)}; tracebacks {tracebacks};"
        f" alive {alive}; failures {failures}"
    )
    return failures


def fuzz_agui(total: int, rng: random.Random, seeds: list[bytes]) -> int:
    failures = 0
    statuses: Counter[int] = Counter()
    started = time.perf_counter()
    with AguiTarget() as target:
        for _ in range(total):
            body = damage(rng.choice(seeds), rng)
            headers = {"accept": "text/event-stream"}
            content_type = rng.choice(CONTENT_TYPES)
            if content_type:
                headers["content-type"] = content_type
            status, problems = target.post(body, headers)
            statuses[status] += 1
            if problems:
                failures += len(problems)
                print("AG-UI FAILURE", problems[:3], body[:200], file=sys.stderr)
        elapsed = time.perf_counter() - started
        log = target.stderr()
        tracebacks = log.count(TRACEBACK)
        alive = target.process.poll() is None
    if tracebacks:
        print(log[log.find(TRACEBACK) - 200 :][:3000], file=sys.stderr)
    failures += tracebacks + (0 if alive else 1)
    print(
        f"agui: {total} bodies in {elapsed:.1f} s = {total / elapsed:,.0f} bodies/s;"
        f" statuses {dict(sorted(statuses.items()))}; tracebacks {tracebacks};"
        f" alive {alive}; failures {failures}"
    )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--bodies", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--pool", type=int, default=300, help="hypothesis draws (x10 values)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    failures = 0
    if args.frames:
        seeds = pool(messages(), args.pool, args.seed)
        failures += fuzz_acp(args.frames, args.batch, rng, seeds)
    if args.bodies:
        seeds = pool(run_inputs(), args.pool, args.seed)
        failures += fuzz_agui(args.bodies, rng, seeds)
    print(f"total failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
