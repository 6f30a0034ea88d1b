"""The hot path's `session/update` params are exactly what the renderer and the SDK give."""

from __future__ import annotations

import json
from typing import Any

from acp import schema as acp
from acp.utils import serialize_params
from hypothesis import given
from hypothesis import strategies as st

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import EVENT_TYPES
from steerable_bridge.transports.acp.hot_updates import hot_params
from steerable_bridge.transports.acp.renderer import AcpRenderer


def sdk_params(session_id: str, event: ev.LoopEvent) -> list[dict[str, Any]]:
    return [
        serialize_params(acp.SessionNotification(session_id=session_id, update=update))
        for update in AcpRenderer().render(event)
    ]


def strict(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@given(
    kind=st.sampled_from([ev.TextDelta, ev.ReasoningDelta]),
    delta=st.text(),
    message_id=st.text(min_size=1),
    run_id=st.text(),
    seq=st.integers(min_value=0, max_value=2**53),
    ts=st.integers(min_value=0, max_value=2**53),
)
def test_hot_params_equal_the_sdk_params_byte_for_byte(
    kind: type[ev.TextDelta] | type[ev.ReasoningDelta],
    delta: str,
    message_id: str,
    run_id: str,
    seq: int,
    ts: int,
) -> None:
    event = kind(session_id="s1", run_id=run_id, seq=seq, ts=ts, message_id=message_id, delta=delta)
    hot = hot_params("sess-1", event)
    (expected,) = sdk_params("sess-1", event)
    assert hot == expected
    assert strict(hot) == strict(expected)  # the same key order too


def test_every_other_kind_takes_the_renderer() -> None:
    hot = {ev.TextDelta, ev.ReasoningDelta}
    for cls in EVENT_TYPES:
        if cls in hot:
            continue
        event = cls.__new__(cls)  # no fields needed: the kind alone decides
        assert hot_params("s", event) is None
