"""A model request sent by reference rebuilds from its base, and every way it can fail to fit
its base is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from steerable_bridge.conformance.agui_requests import check_reference, rebuild
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.ports.model import ModelRequest, ToolSpec
from steerable_bridge.runtime.values import Message, TextPart
from steerable_bridge.transports.agui.requests import RequestChain

Json = dict[str, Any]


def _event(seq: int, count: int) -> ev.ModelRequestEvent:
    messages = tuple(
        Message(id=f"m{i}", role="user", content=(TextPart(text=f"say {i}"),)) for i in range(count)
    )
    request = ModelRequest(
        model="m",
        system="be brief",
        messages=messages,
        tools=(ToolSpec(name="calc", description="adds", parameters_json="{}"),),
    )
    return ev.ModelRequestEvent(session_id="t", run_id="r", seq=seq, ts=1, step=1, request=request)


def _pair() -> tuple[Json, Json, ev.ModelRequestEvent]:
    chain = RequestChain()
    first, second = _event(1, 2), _event(6, 4)
    base = json.loads(chain.value_json(first))
    return base, json.loads(chain.value_json(second)), second


def test_a_value_by_reference_rebuilds_to_the_whole_event() -> None:
    base, value, second = _pair()
    assert codec.event_from_jsonable(rebuild(value, base)) == second


def _ref(edit: Callable[[Json], None]) -> Callable[[Json, Json], None]:
    return lambda value, base: edit(value["request_ref"])


BREAKS: dict[str, Callable[[Json, Json], None]] = {
    "did not carry": lambda value, base: base.clear(),
    "previous request is seq": lambda value, base: base.update(seq=0),
    "make no": _ref(lambda ref: ref.update(messages=9)),
    "longer than its base": _ref(lambda ref: ref.update(prefix=3, messages=5)),
    "system prompt it rebuilds": _ref(lambda ref: ref.update(system="0" * 16)),
    "tools it rebuilds": lambda value, base: base["request"]["tools"].clear(),
    "not a request before it": _ref(lambda ref: ref.update(base=6)),
    "not a count": _ref(lambda ref: ref.update(tokens=-1)),
    "exactly": _ref(lambda ref: ref.pop("tokens")),
}


@pytest.mark.parametrize("problem", sorted(BREAKS))
def test_each_misfit_is_named(problem: str) -> None:
    base, value, _ = _pair()
    value, base = copy.deepcopy(value), copy.deepcopy(base)
    BREAKS[problem](value, base)
    with pytest.raises(ValueError, match=problem):
        rebuild(value, base or None)


def test_the_shape_is_checked_without_the_base() -> None:
    _, value, _ = _pair()
    assert check_reference(value)["prefix"] == 2
    value["request"]["messages"].pop()
    with pytest.raises(ValueError, match="make no"):
        check_reference(value)
