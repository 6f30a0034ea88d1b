"""The fast SSE encoder writes exactly the bytes `EventEncoder` writes for the same events."""

from __future__ import annotations

import dataclasses

from ag_ui.core import MessagesSnapshotEvent
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import TextPart, Usage
from steerable_bridge.transports.agui.history import MessageFold
from steerable_bridge.transports.agui.renderer import DERIVED, AguiRenderer
from steerable_bridge.transports.agui.wire import _FAST, SseEncoder
from tests.lanes import examples
from tests.runtime.strategies import for_dataclass

START = ev.RunStarted(session_id="t", run_id="r", seq=0, ts=1, model="m")
_any_text = st.text(st.characters(codec="utf-8"), max_size=20)


def _pair() -> tuple[SseEncoder, SseEncoder]:
    fast = SseEncoder(AguiRenderer(thread_id="t", run_id="x", messages=lambda: []))
    slow = SseEncoder(AguiRenderer(thread_id="t", run_id="x", messages=lambda: []))
    assert fast.encode(START) == slow.encode_models(slow.renderer.render(START), seq=START.seq)
    return fast, slow


def _bounded(event: ev.LoopEvent) -> ev.LoopEvent:
    return dataclasses.replace(event, ts=abs(event.ts) % 2**50)


@settings(max_examples=examples(80), deadline=None)
@given(data=st.data())
def test_every_kind_is_byte_identical_to_the_sdk_encoder(data: st.DataObject) -> None:
    fast, slow = _pair()
    for cls in ev.EVENT_TYPES:
        if cls is ev.RunStarted:
            continue
        event = _bounded(data.draw(for_dataclass(cls)))
        assert fast.encode(event) == slow.encode_models(
            slow.renderer.render(event), seq=event.seq
        ), cls


@settings(max_examples=examples(200), deadline=None)
@given(
    cls=st.sampled_from(
        sorted(
            (c for c in _FAST if c in AguiRenderer.NATIVE or c is ev.ToolStarted),
            key=lambda c: c.__name__,
        )
    ),
    text=_any_text,
    other=_any_text,
    number=st.integers(min_value=0, max_value=2**50),
    finish=st.sampled_from(
        ["end_turn", "tool_calls", "max_tokens", "refusal", "cancelled", "error"]
    ),
)
def test_fast_kinds_escape_any_text_like_the_sdk(
    cls: type[ev.EventBase], text: str, other: str, number: int, finish: str
) -> None:
    fast, slow = _pair()
    fields = {
        "session_id": "t",
        "run_id": other,
        "seq": number,
        "ts": number,
        "message_id": other,
        "delta": text,
        "call_id": text,
        "name": other,
        "parent_message_id": text,
        "step": number,
        "finish_reason": finish,
        "usage": Usage(
            prompt_tokens=number, completion_tokens=1, cached_tokens=2, reasoning_tokens=3
        ),
    }
    names = {f.name for f in dataclasses.fields(cls)} - {"kind"}
    event = cls(**{k: v for k, v in fields.items() if k in names})
    assert fast.encode(event) == slow.encode_models(slow.renderer.render(event), seq=event.seq)  # type: ignore[arg-type]


def test_the_fast_path_is_taken_for_hot_kinds() -> None:
    fast, _ = _pair()
    delta = ev.TextDelta(session_id="t", run_id="r", seq=1, ts=2, message_id="m", delta="hi")
    assert _FAST[ev.TextDelta](delta, '"r"') == fast.encode(delta)
    assert b'"delta":"hi"' in fast.encode(delta)


def test_every_frame_carries_the_id_of_its_place_in_the_log() -> None:
    fast, _ = _pair()
    delta = ev.TextDelta(session_id="t", run_id="r", seq=7, ts=2, message_id="m", delta="hi")
    assert fast.encode(delta).startswith(b"id: 7\ndata: ")
    done = ev.RunFinished(session_id="t", run_id="r", seq=9, ts=3, stop_reason="end_turn")
    frames = fast.encode(done).decode().split("\n\n")[:-1]
    assert [f.split("\n", 1)[0] for f in frames] == ["id: 9.0", "id: 9"]  # snapshot, finished


def test_a_snapshot_from_the_folds_kept_json_is_byte_identical_to_the_sdk_encoder() -> None:
    events = [
        ev.UserMessage(session_id="t", run_id="r", seq=1, ts=1, message_id="u",
                       content=(TextPart(text='say "\u00e9" \U0001f600'),)),
        ev.TextStart(session_id="t", run_id="r", seq=2, ts=1, message_id="m"),
        ev.TextDelta(session_id="t", run_id="r", seq=3, ts=1, message_id="m", delta="ok"),
        ev.ToolCallStart(session_id="t", run_id="r", seq=4, ts=1, call_id="c", name="f",
                         parent_message_id="m"),
        ev.ToolCallEnd(session_id="t", run_id="r", seq=5, ts=1, call_id="c", name="f",
                       arguments_json="{}"),
        ev.ToolFinished(session_id="t", run_id="r", seq=6, ts=1, call_id="c",
                        status="completed", content=(TextPart(text="out"),)),
    ]  # fmt: skip
    fold = MessageFold("t")
    fast = SseEncoder(AguiRenderer(thread_id="t", run_id="x", messages=fold.messages),
                      messages_json=fold.snapshot_json)  # fmt: skip
    slow = SseEncoder(AguiRenderer(thread_id="t", run_id="x", messages=fold.messages))
    for event in events:
        fold.event(event)
        snapshot = MessagesSnapshotEvent(messages=fold.messages(), metadata=DERIVED)
        assert fast.encode_models([snapshot], seq=event.seq) == slow.encode_models(
            [snapshot], seq=event.seq
        )
        assert fast.encode_models([snapshot]) == EventEncoder().encode(snapshot).encode()
    run = AguiRenderer(thread_id="t", run_id="x", messages=fold.messages)
    own = SseEncoder(run, messages_json=fold.snapshot_json)
    own.encode_models(run.open())
    done = ev.RunFinished(session_id="t", run_id="x", seq=9, ts=3, stop_reason="end_turn")
    frame = own.encode(done).decode().split("\n\n")[0].split("\n", 1)[1] + "\n\n"
    validated = MessagesSnapshotEvent(messages=fold.messages(), metadata=DERIVED)
    assert frame == EventEncoder().encode(validated)  # the renderer's unvalidated event too
