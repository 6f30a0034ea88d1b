"""What repairing lone surrogates adds to the per-delta hot path of a model stream.

Every text, reasoning and tool-argument delta of the OpenAI-compatible decoder now passes
through a `SurrogateJoiner` (`runtime/encoding/surrogates.py`). This measures, in ns per decoded
chunk, `ChunkDecoder.feed` on already-parsed Chat Completions chunks — ASCII text deltas,
CJK text deltas (non-ASCII: the joiner's regex check runs), and tool-argument fragments —
for this build and, with `--baseline REV`, for `openai_wire.py` as it was at git revision
REV (loaded from `git show`, so the comparison runs in one process on one machine). Also
prints the joiner alone on the same deltas. Times are CPU time (`time.process_time_ns`),
best of `--repeats` rounds.

    uv run python bench/surrogates.py --baseline ebfcbd3 [--chunks 200000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steerable_bridge.adapters.llm import openai_wire
from steerable_bridge.runtime.encoding.surrogates import SurrogateJoiner

WIRE = "steerable_bridge/adapters/llm/openai_wire.py"


def chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}


CASES: dict[str, list[dict[str, Any]]] = {
    "ascii text": [chunk({"content": word}) for word in ("Hello", " wor", "ld, ", "this")],
    "cjk text": [chunk({"content": word}) for word in ("你好", "世界", "这是", "测试")],
    "tool args": [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in ('{"pa', 'th": ', '"src/', 'a.py"')
    ],
}


def baseline_module(revision: str) -> Any:
    source = subprocess.run(
        ["git", "show", f"{revision}:{WIRE}"], capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_openai_wire.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_openai_wire", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def per_call_ns(work: Callable[[], None], calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.process_time_ns()
        work()
        best = min(best, (time.process_time_ns() - start) / calls)
    return best


def decoder_work(module: Any, chunks: list[dict[str, Any]], count: int) -> Callable[[], None]:
    def work() -> None:
        decoder = module.ChunkDecoder()
        feed = decoder.feed
        decoder.feed(
            chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read_file"}}]})
        )
        for i in range(count):
            feed(chunks[i & 3])

    return work


def joiner_work(chunks: list[dict[str, Any]], count: int) -> Callable[[], None]:
    deltas = [c["choices"][0]["delta"].get("content") or "x" for c in chunks]

    def work() -> None:
        feed = SurrogateJoiner().feed
        for i in range(count):
            feed(deltas[i & 3])

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare with (e.g. ebfcbd3)")
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    old = baseline_module(args.baseline) if args.baseline else None
    print(f"ns per decoded chunk, best of {args.repeats} x {args.chunks:,} chunks")
    for name, chunks in CASES.items():
        now = per_call_ns(decoder_work(openai_wire, chunks, args.chunks), args.chunks, args.repeats)
        line = f"  {name:<11} this build {now:7.0f} ns"
        if old is not None:
            then = per_call_ns(decoder_work(old, chunks, args.chunks), args.chunks, args.repeats)
            line += f"   {args.baseline} {then:7.0f} ns   added {now - then:+6.0f} ns"
            line += f" ({(now - then) / then:+.1%})"
        if name != "tool args":
            alone = per_call_ns(joiner_work(chunks, args.chunks), args.chunks, args.repeats)
            line += f"   joiner alone {alone:4.0f} ns"
        print(line)


if __name__ == "__main__":
    main()
