"""Event JSON: exact round trip for every variant, frozen variants, the published schema."""

from __future__ import annotations

import json

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.values import TextPart
from tests.lanes import examples
from tests.runtime.strategies import events, for_dataclass

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=ev.KINDS)
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_every_variant_round_trips_exactly_through_json(cls: type, data: st.DataObject) -> None:
    event = data.draw(for_dataclass(cls))
    text = codec.event_to_json(event)
    back = codec.event_from_json(text)
    assert type(back) is cls
    assert back == event
    assert codec.event_to_json(back) == text  # stable text, byte for byte
    assert json.loads(text)["kind"] == event.kind
    assert codec.event_from_jsonable(codec.event_to_jsonable(event)) == event


@settings(max_examples=examples(60), deadline=None)
@given(event=events())
def test_json_lines_of_mixed_events_decode_to_the_same_sequence(event: ev.LoopEvent) -> None:
    line = codec.event_to_json(event)
    assert "\n" not in line  # one event per line in --jsonl and stores
    assert codec.event_from_json(line.encode()) == event


def test_unknown_kind_and_missing_fields_are_rejected() -> None:
    good = ev.TextDelta(session_id="s", run_id="r", seq=1, ts=2, message_id="m", delta="hi")
    payload = json.loads(codec.event_to_json(good))
    with pytest.raises(pydantic.ValidationError):
        codec.event_from_json(json.dumps({**payload, "kind": "text_deltaa"}))
    del payload["delta"]
    with pytest.raises(pydantic.ValidationError) as info:
        codec.event_from_json(json.dumps(payload))
    assert "delta" in str(info.value)


def test_content_parts_keep_their_variant() -> None:
    event = ev.UserMessage(
        session_id="s", run_id="r", seq=0, ts=0, message_id="m", content=(TextPart(text="x"),)
    )
    back = codec.event_from_json(codec.event_to_json(event))
    assert isinstance(back, ev.UserMessage)
    assert isinstance(back.content[0], TextPart)


def test_schema_describes_every_kind() -> None:
    schema = codec.schema()
    assert schema["title"] == "LoopEvent"
    mapping = schema["discriminator"]["mapping"]
    assert sorted(mapping) == sorted(ev.KINDS)
    definitions = schema["$defs"]
    text_delta = definitions[mapping["text_delta"].rsplit("/", 1)[-1]]
    assert {"session_id", "run_id", "seq", "ts", "message_id", "delta"} <= set(
        text_delta["required"]
    )
