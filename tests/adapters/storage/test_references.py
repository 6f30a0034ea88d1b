"""Record format 3: event bodies without envelope or defaults, and model requests stored by
reference to their base request and to the events their messages come from — every read
gives back the logged event exactly, and an older build refuses the rows by name."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.adapters.storage import formats
from steerable_bridge.adapters.storage.formats import Row, decode_event, encode_body
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.request_writer import RequestWriter
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.projection import project_history
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.ports.storage import StoreError
from steerable_bridge.runtime.values import Message, TextPart, ToolCall
from tests.lanes import examples
from tests.runtime.strategies import for_dataclass

pytestmark = pytest.mark.timeout(60)

SID = "s1"


def row(event: ev.LoopEvent, data: str, found: int | None = formats.FORMAT) -> Row:
    return (event.seq, found, event.kind, event.run_id, event.ts, data)


def written(events: list[ev.LoopEvent]) -> list[Row]:
    writer = RequestWriter()
    return [row(e, writer.body(e)) for e in events]


def fetch_for(
    resolver: Resolver, tail: list[Row], rows: list[Row], swap: dict[int, Row] | None = None
) -> Resolver:
    """What a store does before decoding a read of `tail` (one row per seq in `rows`):
    fetch the rows it refers to, and the block of rows its assistant messages come from."""
    start = tail[0][0] if tail else 0
    while True:
        need, block = resolver.missing(tail), resolver.block(tail, start)
        if not need and block is None:
            return resolver
        if block is not None:
            resolver.extra.update((seq, rows[seq]) for seq in range(block[0], block[1] + 1))
        for seq in need - resolver.extra.keys():
            resolver.extra[seq] = (swap or {}).get(seq, rows[seq])


@pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=ev.KINDS)
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_every_variant_round_trips_through_its_body(cls: type, data: st.DataObject) -> None:
    event = data.draw(for_dataclass(cls))
    body = encode_body(event)
    assert not {"session_id", "run_id", "seq", "ts", "kind"} & json.loads(body).keys()
    back = decode_event(event.session_id, row(event, body))
    assert type(back) is cls and back == event


def test_a_body_leaves_out_defaults_but_keeps_tags() -> None:
    usage = ev.UsageUpdated(session_id=SID, run_id="r", seq=1, ts=2, used=5)
    assert encode_body(usage) == '{"used":5}'
    done = ev.ToolFinished(
        session_id=SID,
        run_id="r",
        seq=2,
        ts=3,
        call_id="c",
        status="completed",
        content=(TextPart(text="out"),),
    )
    assert json.loads(encode_body(done)) == {
        "call_id": "c",
        "status": "completed",
        "content": [{"type": "text", "text": "out"}],
    }


class Log:
    """A hand-built session log: user prompts, tool results, requests, compactions."""

    def __init__(self) -> None:
        self.events: list[ev.LoopEvent] = []

    def add(self, cls: type[ev.EventBase], **fields: object) -> ev.LoopEvent:
        seq = len(self.events)
        event = cls(session_id=SID, run_id=f"r{seq // 10}", seq=seq, ts=1000 + seq, **fields)  # type: ignore[arg-type]
        self.events.append(event)  # type: ignore[arg-type]
        return event  # type: ignore[return-value]

    def request(self, *, system: str = "sys", extra: tuple[Message, ...] = ()) -> ev.LoopEvent:
        messages = project_history(self.events) + extra
        tools = (ToolSpec(name="read", description="Read", parameters_json="{}"),)
        request = ModelRequest(model="m", system=system, messages=messages, tools=tools)
        return self.add(ev.ModelRequestEvent, step=1, request=request)

    def user(self, text: str) -> None:
        self.add(ev.UserMessage, message_id=f"u{len(self.events)}", content=(TextPart(text=text),))

    def tool_turn(self, output: str) -> None:
        call = f"c{len(self.events)}"
        self.add(ev.TextDelta, message_id="m", delta="let me look")
        self.add(ev.ToolCallEnd, call_id=call, name="read", arguments_json="{}")
        self.add(ev.ModelResponseEvent, step=1, finish_reason="tool_calls")
        self.add(
            ev.ToolFinished,
            call_id=call,
            status="completed",
            content=(TextPart(text=output),),
        )


def session(through: int = 6) -> Log:
    """Three requests, a compaction through `through` (by default keeping the second tool
    turn verbatim), a request after it and one more with another system prompt."""
    log = Log()
    log.user("first")
    log.request()
    log.tool_turn("A" * 500)
    log.request()
    log.tool_turn("B" * 500)
    log.request()
    log.add(ev.Compaction, summary="they read A", through_seq=through, trigger="pressure")
    log.request()
    log.user("second")
    log.request(system="sys 2")
    return log


def test_requests_store_only_what_is_new_and_read_back_exactly() -> None:
    log = session()
    rows = written(log.events)
    assert Resolver(SID).decode_all(rows) == log.events
    requests = [(r, json.loads(r[5])) for r in rows if r[2] == "model_request"]
    bodies = [body for _, body in requests]
    assert all("refs" in body for body in bodies[1:])
    assert "A" * 500 not in rows[requests[1][0][0]][5]  # the tool result: a reference
    second = bodies[1]["request"]["messages"]
    assert second[0] == [0, 1] and second[-1] == 5  # the first request, then seq 5's result
    after_compaction = bodies[3]["request"]["messages"]
    assert "base" not in bodies[3]["refs"]  # a root: no chain of bases crosses a compaction
    assert after_compaction[0] == 12 and after_compaction[-1] == 10  # summary, kept result
    assert not any(isinstance(item, list) and len(item) == 2 for item in after_compaction)
    quoted = bodies[3]["refs"]  # the tools and system prompt of the first request, quoted
    assert quoted["system_at"][0] == 1 and quoted["tools_at"][0] == 1
    assert "tools" not in bodies[3]["request"] and bodies[3]["request"]["system"] == ""
    last = bodies[4]
    assert last["request"]["system"] == "sys 2" and "system" not in last["refs"]
    assert "tools" in last["refs"] and "tools" not in last["request"]


def test_a_partial_read_names_the_rows_it_needs_then_decodes() -> None:
    log = session()
    rows = written(log.events)
    tail = rows[14:]
    resolver = Resolver(SID)
    need = resolver.missing(tail)
    assert need and all(seq < 14 for seq in need)
    fetch_for(resolver, tail, rows)
    assert resolver.decode_all(tail) == log.events[14:]


def test_a_row_quoted_for_its_tools_is_fetched_but_never_decoded() -> None:
    """The request after a compaction quotes the system prompt and tools of a request
    before the tail; a read fetches that row and reads only what it quotes, so the rows
    that row refers to are never needed (the compaction keeps no turn: a kept assistant
    message would need the rows it was streamed in)."""
    log = session(through=10)
    rows = written(log.events)

    def read(tail: list[Row], quoted_row: Row) -> Resolver:
        return fetch_for(Resolver(SID), tail, rows, {1: quoted_row})

    tail = rows[12:]
    resolver = read(tail, rows[1])
    assert 1 in resolver.literals and 0 not in resolver.messages  # row 1's prompt: not read
    assert resolver.decode_all(tail) == log.events[12:]
    assert 1 not in resolver.requests
    body = json.loads(rows[1][5])
    body["request"]["system"] = "another prompt"
    resolver = read(tail, (*rows[1][:5], json.dumps(body)))
    with pytest.raises(StoreError) as err:
        resolver.decode_all(tail)
    assert "do not match" in err.value.message


def test_a_reference_to_a_row_that_is_not_there_is_a_corrupt_record() -> None:
    log = session()
    rows = written(log.events)
    del rows[5]  # the tool result the second request refers to
    with pytest.raises(StoreError) as err:
        Resolver(SID).decode_all(rows)
    assert err.value.code == "corrupt_record"
    assert "seq 6 " in err.value.message and "refers to 5" in err.value.message
    broken = list(written(log.events))
    body = json.loads(broken[6][5])
    body["request"]["messages"][0] = [0, 99]
    broken[6] = (*broken[6][:5], json.dumps(body))
    with pytest.raises(StoreError) as slice_err:
        Resolver(SID).decode_all(broken)
    assert "refers to nothing" in slice_err.value.message


def test_an_older_build_refuses_format_4_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [(*r[:1], 4, *r[2:]) for r in written(session().events)]
    for older in (2, 3):  # format 3 could not read the quotes of format 4
        monkeypatch.setattr(formats, "FORMAT", older)
        for bad in (rows[0], rows[6]):
            with pytest.raises(StoreError) as err:
                Resolver(SID).decode_all([bad])
            assert err.value.code == "format_too_new"
            assert "record format 4" in err.value.message and "upgrade" in err.value.message


def test_format_3_rows_still_read() -> None:
    log = session()
    rows = [(*r[:1], 3, *r[2:]) for r in written(log.events)]  # no quotes: rows 0..12
    assert Resolver(SID).decode_all(rows[:13]) == log.events[:13]


def test_format_1_and_2_rows_mix_with_format_3() -> None:
    log = session()
    rows = written(log.events)
    full = list(log.events)
    mixed = list(rows)
    mixed[0] = row(full[0], json.dumps({**json.loads(rows[0][5]), **_envelope(full[0])}), 1)
    first = full[1]
    assert isinstance(first, ev.ModelRequestEvent)
    from steerable_bridge.runtime.encoding.codec import event_to_json

    mixed[1] = row(first, event_to_json(first), None)  # unstamped: the first durable builds
    second = full[6]
    assert isinstance(second, ev.ModelRequestEvent)
    prefix = len(first.request.messages)
    slim = json.loads(event_to_json(second))
    slim["request"]["messages"] = slim["request"]["messages"][prefix:]
    slim["request_ref"] = {"base_seq": first.seq, "prefix": prefix}
    mixed[6] = row(second, json.dumps(slim), 2)  # format 2: a prefix of its base
    assert Resolver(SID).decode_all(mixed) == log.events


def _envelope(event: ev.LoopEvent) -> dict[str, object]:
    return {
        "session_id": event.session_id,
        "run_id": event.run_id,
        "seq": event.seq,
        "ts": event.ts,
        "kind": event.kind,
    }


_PIECES = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.sampled_from(["a", "b", "same"])),
        st.tuples(st.just("tool"), st.sampled_from(["x" * 50, "y", "same"])),
        st.tuples(st.just("request"), st.sampled_from(["sys", "other"])),
        st.tuples(st.just("extra"), st.sampled_from(["note", "same"])),
        st.tuples(st.just("compact"), st.integers(min_value=0, max_value=40)),
    ),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(pieces=_PIECES)
def test_any_log_of_requests_reads_back_exactly(pieces: list[tuple[str, object]]) -> None:
    """Requests that repeat, drop and reorder messages, with equal messages from different
    events, compactions anywhere and changing system prompts: every read is exact."""
    log = Log()
    for what, value in pieces:
        if what == "user":
            log.user(str(value))
        elif what == "tool":
            log.tool_turn(str(value))
        elif what == "request":
            log.request(system=str(value))
        elif what == "extra":
            note = Message(id="x", role="assistant", content=(TextPart(text=str(value)),))
            call = Message(
                id="y",
                role="assistant",
                tool_calls=(ToolCall(call_id="c", name="read", arguments_json="{}"),),
            )
            log.request(extra=(note, call))
        else:
            through = min(int(str(value)), len(log.events) - 1)
            log.add(ev.Compaction, summary="s", through_seq=through, scope="history")
    rows = written(log.events)
    assert Resolver(SID).decode_all(rows) == log.events
    for start in range(0, len(rows), 7):
        resolver = fetch_for(Resolver(SID), rows[start:], rows)
        assert resolver.decode_all(rows[start:]) == log.events[start:]


def test_a_model_call_that_never_answered_leaves_none_of_its_events_in_the_writer() -> None:
    """A cancelled call logs no `model_response`: its deltas, kept to name the answer, must
    go when its step ends, not stay as long as the store keeps the session's writer."""
    request = ModelRequest(model="m", system="s", messages=(), tools=())
    writer = RequestWriter()
    events: list[ev.LoopEvent] = [
        ev.ModelRequestEvent(session_id=SID, run_id="r", seq=0, ts=0, step=1, request=request),
        ev.TextStart(session_id=SID, run_id="r", seq=1, ts=0, message_id="a"),
    ]
    events += [
        ev.TextDelta(session_id=SID, run_id="r", seq=seq, ts=0, message_id="a", delta="word ")
        for seq in range(2, 202)
    ]
    for event in events:
        writer.body(event)
    assert writer.step_events == 201
    writer.body(ev.TextEnd(session_id=SID, run_id="r", seq=202, ts=0, message_id="a"))
    writer.body(
        ev.StepFinished(
            session_id=SID, run_id="r", seq=203, ts=0, step=1, finish_reason="cancelled"
        )
    )
    assert writer.step_events == 0
    writer.body(ev.RunFinished(session_id=SID, run_id="r", seq=204, ts=0, stop_reason="cancelled"))
    assert writer.step_events == 0
