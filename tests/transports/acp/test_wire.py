"""The model-free `session/update` params of text and thought chunks are the SDK path's, byte
for byte, and the encoder writes every frame as strict JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from acp import schema as acp
from acp.utils import serialize_params

from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.acp.batching import _encode
from steerable_bridge.transports.acp.renderer import AcpRenderer
from steerable_bridge.transports.acp.wire import chunk_params

TEXTS = [
    "hello",
    "",
    'quote " backslash \\ slash / tab \t newline \n',
    "controls \x00\x01\x1f\x7f",
    "non-ASCII é ß 中文 \u2028 \u2029 😀",
    "looks like NaN and Infinity",
    "x" * 5000,
]


def _frame(params: Any) -> bytes:
    return _encode({"jsonrpc": "2.0", "method": "session/update", "params": params})


@pytest.mark.parametrize("cls", [ev.TextDelta, ev.ReasoningDelta])
@pytest.mark.parametrize("text", TEXTS)
def test_chunk_frame_is_the_model_paths(cls: type[Any], text: str) -> None:
    event = cls(
        session_id="sess_1",
        run_id="run_é1",
        seq=12_345,
        ts=1_700_000_000_123,
        message_id='msg "7"',
        delta=text,
    )
    (update,) = AcpRenderer().render(event)
    model_path = serialize_params(acp.SessionNotification(session_id="sess_1", update=update))
    fast = chunk_params("sess_1", event)
    assert fast == model_path
    assert _frame(fast) == _frame(model_path)
    assert json.loads(_frame(fast))["params"]["update"]["content"]["text"] == text


def test_encoder_writes_strict_json_for_what_the_fast_encoder_cannot() -> None:
    nan = _encode({"a": float("nan"), "b": [float("inf")], "c": "NaN"})
    assert json.loads(nan) == {"a": None, "b": [None], "c": "NaN"}
    assert json.loads(_encode({"a": "lone \ud800"})) == {"a": "lone \ufffd"}
    plain = {"jsonrpc": "2.0", "id": 3, "result": {"k": [1, 2.5, True, None, "é"]}}
    assert json.loads(_encode(plain)) == plain
    assert _encode(plain).endswith(b"}\n")
