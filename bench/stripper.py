"""Pseudo tool-call recovery cost: stripper throughput and what it adds to each loop event.

1. The filter alone (`PseudoCallFilter`: stripper + parsers + schema checks, every format
   of `runtime/model_quality/tool_markers.py` on) over ~1 MB of model text in 4-character deltas, as
   servers stream it: plain prose, prose that is dense with `<`, `>`, `[`, `{` and
   backticks (inline code, fences, comparisons, braces: the worst case), a reply mix with a
   text-written tool call every ~2 KB, and reasoning written as text (`<think>` prose).
   Prints characters/s and µs per delta.
2. The loop: one turn of a real `Agent` session whose scripted model streams each kind
   of text in 4-character deltas with one tool offered, with the quality layer off and
   on (alternating runs, best of each). Prints µs per LoopEvent for both and the added
   share; the target is < 5 % on ordinary prose.

Times are CPU time of this process (`time.process_time`), so other work on a shared
machine disturbs them less than wall-clock time would.

    uv run python bench/stripper.py [--chars 1000000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import anyio

from steerable_bridge.adapters.llm.scripted import Round, Script, ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.model_quality.pseudo_calls import PseudoCallFilter
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.model import ModelProvider, ToolSpec
from steerable_bridge.runtime.ports.tools import Tool, ToolResult
from steerable_bridge.runtime.turns.turn import LoopSettings, TurnInput
from steerable_bridge.runtime.values import TextPart, canonical_json

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
TOOLS = (ToolSpec(name="read_file", description="", parameters_json=canonical_json(SCHEMA)),)
PROSE = (
    "The service reads its configuration at start-up and keeps it for the life of the"
    " process, so a change needs a restart. Each request is checked, logged and answered"
    " within the deadline the client gave; slow backends are cut off and retried once. "
)
DENSE = (
    'If a < b and c > d, call `f(x)` with [x] set; see `cfg["k"]` and <b>bold</b> tags.'
    "\n```python\nif a < b:\n    xs = [i for i in range(3)]\n```\n"
    'Sets {a, b} and maps {k: v}; shift a >> b; see [the docs](#x) and {"k": 1}.\n'
)
CALL = '\n<tool_call>\n{"name": "read_file", "arguments": {"path": "notes/a.txt"}}\n</tool_call>\n'


def document(kind: str, size: int) -> str:
    if kind == "prose":
        unit = PROSE
    elif kind == "dense":
        unit = DENSE
    elif kind == "think":
        body = PROSE * (size // len(PROSE) + 1)
        return ("<think>" + body)[: size - 20] + "</think>The answer."
    else:
        unit = PROSE * 4 + DENSE * 4 + CALL
    return (unit * (size // len(unit) + 1))[:size]


def deltas(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def filter_alone(kind: str, size: int, repeats: int) -> tuple[float, float]:
    """Best characters/s and µs per delta of the filter alone."""
    pieces = deltas(document(kind, size))
    best = float("inf")
    for _ in range(repeats):
        recovery = PseudoCallFilter(TOOLS)
        plain, feed = recovery.plain, recovery.feed
        gc.collect()
        start = time.process_time()
        for piece in pieces:  # what the loop does: the cheap test first
            if not plain(piece):
                feed(piece)
        recovery.finish()
        best = min(best, time.process_time() - start)
    return size / best, best / len(pieces) * 1e6


def agent(text: str, quality: QualitySettings) -> Agent:
    script = Script(rounds=[Round(text=text, chunk_size=4)], loop=True)
    provider = ScriptedProvider(script, route="scripted:bench")

    def factory(name: str) -> ModelProvider:
        return provider

    async def read(args: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult(content=(TextPart(text="contents"),))

    router = ModelRouter()
    router.register("scripted", factory)
    counter = iter(range(10**12))
    config = AgentConfig(
        model="scripted:bench",
        loop=LoopSettings(new_id=lambda prefix: f"{prefix}_{next(counter)}"),
        quality=quality,
    )
    made = Agent(router=router, store=MemoryStore(), config=config)
    made.tools.register(Tool(name="read_file", description="", parameters=SCHEMA, handler=read))
    return made


async def loop_turn(text: str, quality: QualitySettings) -> tuple[float, int]:
    """µs per LoopEvent of one turn streaming `text`."""
    session = await agent(text, quality).new_session("/tmp")
    gc.collect()
    start = time.process_time()
    outcome = await session.prompt(TurnInput(content=(TextPart(text="go"),)))
    elapsed = time.process_time() - start
    assert outcome.stop_reason == "end_turn", outcome
    return elapsed / len(session.log) * 1e6, len(session.log)


async def compare(kind: str, chars: int, repeats: int) -> None:
    """Best of `repeats` alternating runs with the quality layer off and on."""
    text = document(kind, chars)
    off: list[float] = []
    on: list[float] = []
    events = 0
    for _ in range(repeats):  # alternate, so load on a shared machine hits both alike
        cost, events = await loop_turn(text, QualitySettings(mode="off"))
        off.append(cost)
        on.append((await loop_turn(text, QualitySettings(mode="on")))[0])
    best_off, best_on = min(off), min(on)
    print(
        f"  {kind:6s} {events:,} events: {best_off:.2f} µs/event off, {best_on:.2f} on"
        f" -> {(best_on - best_off) / best_off * 100:+.1f} % per event"
    )


async def main(args: argparse.Namespace) -> None:
    print(
        f"filter alone, {args.chars:,} characters in 4-character deltas (best of {args.repeats}):"
    )
    for kind in ("prose", "dense", "mixed", "think"):
        rate, per_delta = filter_alone(kind, args.chars, args.repeats)
        print(f"  {kind:6s} {rate / 1e6:6.2f} M chars/s   {per_delta:5.2f} µs per delta")
    print(f"loop, one turn of {args.loop_chars:,} characters (best of {args.repeats}):")
    for kind in ("prose", "dense", "think"):  # no calls: each turn is one step, on or off
        await compare(kind, args.loop_chars, args.repeats)
    print("target: the quality layer adds < 5 % per event on ordinary prose")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--loop-chars", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    anyio.run(main, parser.parse_args())
