"""`StepEvents`, what the request writer keeps of one model call: the same message as the
call's events make, its first and last seq and its count, while each stretch of deltas of one
message is kept as text, so the writer holds no delta event past the log's fold."""

from __future__ import annotations

from typing import Any

from steerable_bridge.adapters.storage.request_writer import RequestWriter
from steerable_bridge.adapters.storage.step_events import StepEvents
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import history_entries
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.session_log.delta_runs import DeltaRun, fold_entries


def _call(start: int = 10) -> list[Any]:
    seq = iter(range(start, start + 100))
    envelope: dict[str, Any] = {"session_id": "s", "run_id": "r"}

    def at(cls: type[Any], **fields: Any) -> Any:
        return cls(**envelope, seq=next(seq), ts=1_700_000_000_000, **fields)

    return [
        at(ev.ReasoningStart, message_id="m"),
        *(at(ev.ReasoningDelta, message_id="m", delta=d) for d in ("Let me ", "look")),
        at(ev.ReasoningEnd, message_id="m"),
        at(ev.TextStart, message_id="m"),
        *(at(ev.TextDelta, message_id="m", delta=d) for d in ("I'll ", "read ", "it.")),
        at(ev.TextEnd, message_id="m"),
        at(ev.ToolCallStart, call_id="c1", name="read_file", parent_message_id="m"),
        *(at(ev.ToolCallDelta, call_id="c1", delta=d) for d in ('{"path"', ': "a.txt"}')),
        at(ev.ToolCallEnd, call_id="c1", name="read_file", arguments_json='{"path": "a.txt"}'),
    ]


def test_it_makes_the_message_the_events_make_and_keeps_one_event_per_stretch() -> None:
    events = _call()
    step = StepEvents()
    for event in events:
        step.add(event)
    assert (step.count, step.first_seq, step.last_seq) == (len(events), 10, 10 + len(events) - 1)
    kept = step.events()
    assert history_entries(kept) == history_entries(events)
    deltas = [e for e in kept if "delta" in e.kind]
    assert [(e.kind, e.seq, e.delta) for e in deltas] == [
        ("reasoning_delta", 11, "Let me look"),
        ("text_delta", 15, "I'll read it."),
        ("tool_call_delta", 20, '{"path": "a.txt"}'),
    ]
    later = events[6:8]  # the text stretch's second and third deltas
    assert not any(k is e for k in kept for e in later)  # a stretch keeps only its first


def test_deltas_of_one_message_apart_in_seq_stay_apart() -> None:
    one, two = _call(0)[5:7], _call(50)[5:7]  # text deltas of message m, seqs 5-6 and 55-56
    step = StepEvents()
    for event in (*one, *two):
        step.add(event)
    assert [(e.seq, e.delta) for e in step.events()] == [(5, "I'll read "), (55, "I'll read ")]
    assert step.count == 4


def test_a_run_taken_whole_keeps_what_its_deltas_taken_one_by_one_keep() -> None:
    events = _call()
    folded = list(fold_entries(events))  # each stretch of deltas one DeltaRun
    assert any(isinstance(e, DeltaRun) for e in folded)
    whole, each = StepEvents(), StepEvents()
    for entry in folded:
        whole.add_run(entry) if isinstance(entry, DeltaRun) else whole.add(entry)
    for event in events:
        each.add(event)
    assert (whole.count, whole.first_seq, whole.last_seq) == (
        each.count,
        each.first_seq,
        each.last_seq,
    )
    assert whole.events() == each.events()


def test_a_resumed_writer_reads_runs_as_it_reads_their_deltas() -> None:
    request = ev.ModelRequestEvent(
        session_id="s",
        run_id="r",
        seq=9,
        ts=1_700_000_000_000,
        step=1,
        request=ModelRequest(model="m", system="", messages=()),
    )
    events = [request, *_call()]
    folded = [request, *fold_entries(events[1:])]
    whole, each = RequestWriter.resumed(folded), RequestWriter.resumed(events)
    assert (whole.next_seq, whole.previous, whole.sources) == (
        each.next_seq,
        each.previous,
        each.sources,
    )
    assert whole.step_events == each.step_events == len(events) - 1
