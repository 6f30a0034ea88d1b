"""AG-UI render + encode throughput: 100,000 LoopEvents to SSE bytes, against plain json.dumps.

The events are a realistic run: mostly small text deltas (30 per message), with a tool call
(start, 6 argument deltas, end, started, result) after every 10 messages and a step around
each message. Three timings over the same events: `SseEncoder.encode` (the server's path:
the renderer plus the byte-identical fast encoder), the plain SDK path (`AguiRenderer.render`
+ `EventEncoder.encode` per event) and `json.dumps` of each event's fields prepared in
advance (pure encoding, no rendering). Prints events/s for each (best of 3 rounds); the
issue's target for the server path is 900,000 events/s.
Run: `uv run python bench/agui_throughput.py [events]`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable

from ag_ui.encoder import EventEncoder

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import TextPart
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.wire import SseEncoder

SESSION, RUN = "thread-bench", "run_5bc3ac95f0bc4881"


def workload(count: int) -> list[ev.LoopEvent]:
    events: list[ev.LoopEvent] = []

    def add(cls: type[ev.EventBase], **fields: object) -> None:
        events.append(
            cls(
                session_id=SESSION,
                run_id=RUN,
                seq=len(events),
                ts=1_795_967_557_967 + len(events),
                **fields,
            )  # type: ignore[arg-type]
        )

    add(ev.RunStarted, model="demo:default")
    message = 0
    while len(events) < count - 1:
        message += 1
        add(ev.StepStarted, step=message)
        mid = f"msg_{message:016x}"
        add(ev.TextStart, message_id=mid)
        for i in range(30):
            add(ev.TextDelta, message_id=mid, delta=f"word{i} ")
        add(ev.TextEnd, message_id=mid)
        if message % 10 == 0:
            call = f"call_{message}_calculate"
            add(ev.ToolCallStart, call_id=call, name="calculate", parent_message_id=mid)
            for piece in ('{"expr', 'ession"', ': "6 * ', "7", '"', "}"):
                add(ev.ToolCallDelta, call_id=call, delta=piece)
            add(
                ev.ToolCallEnd,
                call_id=call,
                name="calculate",
                arguments_json='{"expression": "6 * 7"}',
                tool_kind="think",
                title="Calculate 6 * 7",
            )
            add(ev.ToolStarted, call_id=call)
            add(
                ev.ToolFinished,
                call_id=call,
                status="completed",
                content=(TextPart(text="6 * 7 = 42"),),
            )
        add(ev.StepFinished, step=message, finish_reason="end_turn")
    del events[count - 1 :]
    add(ev.RunFinished, stop_reason="end_turn")
    return events


def best_of(rounds: int, job: Callable[[], int]) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(rounds):
        start = time.perf_counter()
        size = job()
        best = min(best, time.perf_counter() - start)
    return best, size


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    events = workload(count)
    prepared = [{f.name: getattr(e, f.name) for f in dataclasses.fields(e)} for e in events]
    for data in prepared:
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = [
                    dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value
                ]
            elif dataclasses.is_dataclass(value):
                data[key] = dataclasses.asdict(value)  # type: ignore[arg-type]

    def server_path() -> int:
        encoder = SseEncoder(AguiRenderer(thread_id=SESSION, run_id="r1", messages=lambda: []))
        return sum(len(encoder.encode(e)) for e in events)

    def sdk_path() -> int:
        renderer = AguiRenderer(thread_id=SESSION, run_id="r1", messages=lambda: [])
        encoder = EventEncoder()
        return sum(len(encoder.encode(m).encode()) for e in events for m in renderer.render(e))

    def plain_json() -> int:
        return sum(len(("data: " + json.dumps(d) + "\n\n").encode()) for d in prepared)

    deltas = sum(isinstance(e, ev.TextDelta | ev.ToolCallDelta) for e in events)
    print(f"{len(events):,} LoopEvents ({deltas / len(events):.0%} text / argument deltas)")
    for name, job, rounds in (
        ("render + encode (server path, fast encoder)", server_path, 3),
        ("render + encode (SDK models + EventEncoder)", sdk_path, 1),
        ("plain json.dumps of prepared dicts", plain_json, 3),
    ):
        seconds, size = best_of(rounds, job)
        print(
            f"{name:<46} {len(events) / seconds:>12,.0f} events/s  {size / seconds / 1e6:7.1f} MB/s"
        )


if __name__ == "__main__":
    main()
