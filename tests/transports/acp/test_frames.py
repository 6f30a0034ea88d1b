"""The frame gate and lone UTF-16 surrogates: an answer is repaired, a request refused by id.

A JS editor may send `"\\ud83d"` alone (JSON allows it; UTF-8 cannot encode it). A response
answers one of the agent's own requests (a file's text, a terminal's output), so refusing it
would leave the agent waiting for an answer that never comes: it is routed with U+FFFD. A
request is refused with its own id, so the editor's prompt gets its error instead of hanging.
"""

from __future__ import annotations

import logging

import pytest

from steerable_bridge.transports.acp.frames import FrameRefusal, check_frame


def test_a_response_holding_a_lone_surrogate_is_routed_repaired(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    line = b'{"jsonrpc":"2.0","id":7,"result":{"content":"half \\ud83d, pair \\ud83d\\ude00"}}'
    checked = check_frame(line)
    assert checked == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": "half \ufffd, pair \U0001f600"},
    }
    assert "request 7" in caplog.text and "U+FFFD" in caplog.text


def test_a_request_holding_a_lone_surrogate_is_refused_with_its_own_id() -> None:
    line = (
        b'{"jsonrpc":"2.0","id":"p1","method":"session/prompt",'
        b'"params":{"sessionId":"s","prompt":[{"type":"text","text":"\\udfff"}]}}'
    )
    checked = check_frame(line)
    assert isinstance(checked, FrameRefusal)
    assert (checked.id, checked.code, checked.reason) == ("p1", -32602, "lone_surrogate")
    assert "send valid Unicode" in checked.message


def test_a_broken_frame_with_a_surrogate_is_still_judged_by_its_shape() -> None:
    checked = check_frame(b'{"jsonrpc":"2.0","id":[1],"result":"\\ud800"}')
    assert isinstance(checked, FrameRefusal) and checked.code == -32600 and checked.id is None
